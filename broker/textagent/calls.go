package textagent

import (
	"slices"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// call is one of the agent's calls, by its own id in its conversation: a host tool, a local
// call, or a built-in (wait, cancel, status).
type call struct {
	conv     *conversation
	id       string
	name     string
	builtin  bool
	local    bool
	brokerID string
	started  time.Time

	background      bool                // it was answered with the placeholder (or is being waited for)
	task            bool                // an MCP task (SPEC 14): background from the start, no placeholder, no completion prompt
	finished        bool                // its job reached a terminal state (a built-in: it answered)
	cancelRequested bool                // a `cancel` of it was accepted
	cancelReason    frames.CancelReason // why its job was cancelled, once finished so
	outcome         *Content            // its result, once finished (background calls)
	state           jobs.State
	consumed        bool         // its result was delivered (directly or through a wait)
	waiter          *call        // the exact wait blocked on it
	prompt          *prompt      // its undelivered completion prompt
	stop            func()       // stops its background-after timer
	wait            *waitRequest // set while this call is a blocked wait
	settled         bool         // exported as a SettledCall (it is in Agent.settled)
}

func (k *call) stopTimer() {
	if k.stop != nil {
		k.stop()
		k.stop = nil
	}
}

// cancelledEnd reports whether the call ended cancelled or timed out (the ends that close
// the sub-agent it stands for).
func (k *call) cancelledEnd() bool {
	return k.finished && (k.state == jobs.Cancelled || k.state == jobs.TimedOut)
}

// toolCall runs an agent.tool_call (SPEC 13): a built-in, or a host or local call that is
// answered at once, or goes to the background after BackgroundAfter (or when its host defers
// it).
func (a *Agent) toolCall(f *frames.AgentToolCall) {
	c := a.convs[f.ConversationID]
	if c == nil {
		a.result(f.CallID, ErrorResult("Unknown conversation "+f.ConversationID))
		return
	}
	if _, dup := c.calls[f.CallID]; dup {
		a.sendError(f.ID, frames.Errorf(frames.CodeBadFrame, "field call_id %q is already used in conversation %s", f.CallID, c.id))
		return
	}
	k := &call{conv: c, id: f.CallID, name: f.Name, local: f.Local, started: a.env.Now()}
	c.add(k)
	if !f.Local {
		switch f.Name {
		case "wait":
			k.builtin = true
			a.waitCall(k, f.Arguments)
			return
		case "status":
			k.builtin = true
			a.statusCall(k, f.Arguments)
			return
		case "cancel":
			k.builtin = true
			a.substantive(c)
			a.cancelCall(k, f.Arguments)
			return
		}
	}
	a.substantive(c)
	brokerID, errText := a.env.StartCall(CallRequest{ConversationID: c.id, CallID: f.CallID, Name: f.Name,
		Arguments: f.Arguments, Local: f.Local, ParentCallID: c.jobParent()})
	if errText != "" {
		k.finished, k.consumed = true, true
		a.result(k.id, ErrorResult(errText))
		return
	}
	k.brokerID = brokerID
	a.jobs[brokerID] = k
	if !k.finished {
		k.stop = a.env.After(a.opts.BackgroundAfter, func() { a.toBackground(k) })
	}
}

// TaskCall starts a task-augmented call of a host tool in the root conversation (SPEC 14, MCP
// Tasks): a background call from the start, with the agent's id callID, that never gets the
// placeholder nor a completion prompt; its result stays for ConsumeTask or an exact wait. A
// non-empty errText means no job was made (the call failed at once, as StartCall answers).
func (a *Agent) TaskCall(callID, name string, args []byte, ttlMS int64) (brokerID, errText string) {
	c := a.convs[RootConversation]
	if _, dup := c.calls[callID]; dup {
		return "", "Tool call id " + callID + " is already used"
	}
	k := &call{conv: c, id: callID, name: name, started: a.env.Now(), background: true, task: true}
	c.add(k)
	a.substantive(c)
	brokerID, errText = a.env.StartCall(CallRequest{ConversationID: c.id, CallID: callID, Name: name,
		Arguments: args, ParentCallID: c.jobParent(), Task: true, TaskTTLMS: ttlMS})
	if errText != "" {
		k.finished, k.consumed = true, true
		return "", errText
	}
	k.brokerID = brokerID
	if !k.finished {
		a.jobs[brokerID] = k
	}
	return brokerID, ""
}

// ConsumeTask marks the result of the finished task callID of the root conversation consumed
// (tasks/result answered it: SPEC 14), as a wait would, and delivers the prompts queued for
// the session (MCP mode: every result is a delivery point), which it returns.
func (a *Agent) ConsumeTask(callID string) []string {
	k := a.convs[RootConversation].calls[callID]
	if k != nil && k.task && k.finished && !k.consumed {
		a.consume(k)
		k.outcome = nil
	}
	if !a.opts.PromptsInResults {
		return nil
	}
	return a.takePrompts()
}

// Tasks lists the ids of the root conversation's tasks (SPEC 14), oldest first.
func (a *Agent) Tasks() []string {
	var ks []*call
	for _, k := range a.convs[RootConversation].calls {
		if k.task && k.brokerID != "" {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(x, y *call) int {
		if c := x.started.Compare(y.started); c != 0 {
			return c
		}
		return strings.Compare(x.id, y.id)
	})
	ids := make([]string, len(ks))
	for i, k := range ks {
		ids[i] = k.id
	}
	return ids
}

// substantive applies the status reminder rule of SPEC 13 to a substantive call (anything
// but status and wait) and ends a run of timed-wait timeouts.
func (a *Agent) substantive(c *conversation) {
	c.timeouts, c.adviceGiven = 0, false
	if c.status != StatusWorking && c.reminderArmed {
		c.reminderArmed = false
		a.enqueue(c, &prompt{text: StatusReminderPrompt, internal: true})
	}
}

// toBackground answers a running call with the background placeholder.
func (a *Agent) toBackground(k *call) {
	k.stopTimer()
	if k.finished || k.background {
		return
	}
	k.background = true
	a.deliver(k.id, frames.ResultKindBackgroundPlaceholder, Placeholder(k.id))
}

// OpenJobs lists the broker call ids of the agent's calls whose jobs have not ended, as far as
// it knows.
func (a *Agent) OpenJobs() []string {
	ids := make([]string, 0, len(a.jobs))
	for id := range a.jobs {
		ids = append(ids, id)
	}
	return ids
}

// Deferred reports that the host deferred a job: its call goes to the background at once.
func (a *Agent) Deferred(brokerID string) {
	if k := a.jobs[brokerID]; k != nil {
		a.toBackground(k)
	}
}

// Finished reports that a job reached its terminal state (SPEC 13): a foreground call is
// answered with its result; a background one's result is queued for `wait` — handed at once to
// an exact or bare wait blocked on it, or else announced with the completion prompt.
func (a *Agent) Finished(brokerID string, o Outcome) {
	k := a.jobs[brokerID]
	if k == nil || k.finished {
		return
	}
	delete(a.jobs, brokerID)
	k.stopTimer()
	k.finished, k.state, k.cancelReason = true, o.State, o.CancelReason
	content := outcomeContent(o)
	if o.State == jobs.Cancelled || o.State == jobs.TimedOut {
		a.cancelChildrenOf(k)
	}
	c := k.conv
	if !k.background {
		k.consumed = true
		a.result(k.id, content)
		return
	}
	k.outcome = &content
	switch {
	case k.waiter != nil:
		w := k.waiter
		k.waiter = nil
		a.consume(k)
		a.answerWait(w, content)
	case c.bare != nil:
		w := c.bare
		c.bare = nil
		a.consume(k)
		a.answerWait(w, withHeader(content, HeaderOriginalToolCallID, k.id))
	case k.task:
		// A task's result waits for tasks/result (or an exact wait): no prompt announces it and
		// a bare wait never takes it (SPEC 14).
	default:
		c.done = append(c.done, k)
		p := &prompt{text: CompletionPrompt(k.id), internal: true, activating: true, of: k}
		k.prompt = p
		a.enqueue(c, p)
	}
}

// consume marks a background result delivered and withdraws its undelivered prompt.
func (a *Agent) consume(k *call) {
	k.consumed = true
	c := k.conv
	for i, d := range c.done {
		if d == k {
			c.done = append(c.done[:i:i], c.done[i+1:]...)
			break
		}
	}
	if k.prompt != nil {
		c.unqueue(k.prompt)
		k.prompt = nil
	}
}

// OutcomeContent renders a job's outcome as the result a call gets (SPEC 13): the content of an
// MCP task's tasks/result.
func OutcomeContent(o Outcome) Content { return outcomeContent(o) }

// outcomeContent renders a job's outcome as a result (SPEC 13).
func outcomeContent(o Outcome) Content {
	var c Content
	switch o.State {
	case jobs.Completed:
		c.SetBody(OutputBody(o.Output))
	case jobs.Failed:
		c.Set(HeaderError, o.Error)
		if body := OutputBody(o.Output); body != "" {
			c.SetBody(body)
		}
	case jobs.Cancelled:
		c.Set(HeaderError, MsgToolCallCanceled)
	case jobs.TimedOut:
		c.Set(HeaderError, MsgToolCallTimedOut)
	case jobs.Declined:
		c.Set(HeaderError, MsgToolCallDeclined)
	default:
		c.Set(HeaderError, "Tool call ended in state "+string(o.State))
	}
	if d, ok := DurationSeconds(o.Duration); ok {
		c.Set(HeaderDurationSeconds, d)
	}
	return c
}

// Messages of outcomes SPEC 13 leaves open (docs/textagent.md).
const (
	// MsgToolCallTimedOut is the error of a call whose ordinary or deferred timeout expired.
	MsgToolCallTimedOut = "Tool call timed out"
	// MsgToolCallDeclined is the error of a call whose spoken permission was declined.
	MsgToolCallDeclined = "declined by the caller"
)

// localResult takes a local call's outcome (SPEC 13: agent.local_result).
func (a *Agent) localResult(f *frames.AgentLocalResult) {
	c := a.conversation(f.ConversationID, f.ID)
	if c == nil {
		return
	}
	k := c.calls[f.CallID]
	if k == nil || !k.local {
		a.sendError(f.ID, frames.Errorf(frames.CodeUnknownCall, "conversation %s has no local call %q", c.id, f.CallID))
		return
	}
	if k.finished {
		a.sendError(f.ID, frames.Errorf(frames.CodeCallFinished, "local call %q has finished", f.CallID))
		return
	}
	isError := f.Error != ""
	if err := a.env.LocalResult(k.brokerID, f.Output, f.Error, isError); err != nil {
		a.sendError(f.ID, frames.Errorf(frames.CodeCallFinished, "local call %q: %v", f.CallID, err))
	}
}

// LocalCancelled tells the agent that one of its local calls was cancelled (SPEC 13).
func (a *Agent) LocalCancelled(brokerID string) {
	if k := a.jobs[brokerID]; k != nil && k.local {
		a.env.Send(&frames.AgentLocalCancel{CallID: k.id, ConversationID: k.conv.id})
	}
}

// InteractionOpened delivers a job's interaction to the call's conversation as a prompt
// (SPEC 9), activating input.
func (a *Agent) InteractionOpened(brokerID string, ia *jobs.Interaction) {
	k := a.jobs[brokerID]
	if k == nil {
		return
	}
	a.open[ia.ID] = &openInteraction{k: k, options: ia.Options}
	a.enqueue(k.conv, &prompt{text: InteractionPrompt(k.id, ia.ID, ia.Prompt, ia.Options), activating: true})
}

// interactionAnswer passes the agent's answer to the job whose open interaction it names,
// matched by the rule of SPEC 9.
func (a *Agent) interactionAnswer(f *frames.AgentInteractionAnswer) {
	c := a.conversation(f.ConversationID, f.ID)
	if c == nil {
		return
	}
	a.answers(c, f)
}
