package textagent

import (
	"github.com/backchannel-io/backchannel/frames"
)

// conversation is one of the text agent's conversations (SPEC 13): the root, or a child made
// for a sub-agent. Its parent watches it.
type conversation struct {
	id         string
	parent     *conversation // the watcher; nil for root
	parentCall *call         // the call that stands for this sub-agent, if any
	children   []*conversation
	cancelled  bool

	inTurn bool
	queue  []*prompt        // prompts not yet delivered, in order
	calls  map[string]*call // by the agent's call id
	// unsettled are the calls of calls not settled yet (Agent.settles): those Export lists.
	unsettled map[string]*call
	done      []*call        // background calls completed and not consumed, in completion order
	bare      *call          // the installed bare wait, if any
	timed     *timedWait     // the installed timed wait, if any
	exact     map[*call]bool // the exact waits blocked on a call of this conversation

	status        StatusState // "" until a status call is accepted
	reminderArmed bool        // the next substantive call queues the status reminder
	timeouts      int         // consecutive timed-wait timeouts without a status or substantive call
	adviceGiven   bool        // the advice was given in the current run of timeouts
}

func newConversation(id string, parent *conversation, parentCall *call) *conversation {
	c := &conversation{id: id, parent: parent, parentCall: parentCall, calls: make(map[string]*call),
		unsettled: make(map[string]*call), exact: make(map[*call]bool), reminderArmed: true}
	if parent != nil {
		parent.children = append(parent.children, c)
	}
	return c
}

// add makes k a call of the conversation.
func (c *conversation) add(k *call) {
	c.calls[k.id] = k
	c.unsettled[k.id] = k
}

// jobParent is the broker call id the jobs of this conversation hang from: its own parent call,
// or its nearest ancestor's (SPEC 11: descendants are closed with the parent call). A parent call
// that was refused at start has no job; the next ancestor's counts. The job engine's cascade goes
// through parent calls that have ended to their open descendants.
func (c *conversation) jobParent() string {
	for x := c; x != nil; x = x.parent {
		if x.parentCall != nil && x.parentCall.brokerID != "" {
			return x.parentCall.brokerID
		}
	}
	return ""
}

// prompt is one agent.prompt waiting for delivery.
type prompt struct {
	id         string
	text       string
	internal   bool
	activating bool
	of         *call // the call whose completion it announces, if it is a completion prompt
}

// enqueue queues a prompt for conversation c (SPEC 13): activating input interrupts the
// conversation's blocked waits at once; prompts are delivered, in order, while the
// conversation is idle.
func (a *Agent) enqueue(c *conversation, p *prompt) {
	if c.cancelled {
		return
	}
	p.id = a.nextID("pr_")
	c.queue = append(c.queue, p)
	if p.activating {
		a.interruptWaits(c, p)
	}
	a.flush(c)
}

// flush delivers the queued prompts of an idle conversation.
func (a *Agent) flush(c *conversation) {
	if c.inTurn {
		return
	}
	q := c.queue
	c.queue = nil
	for _, p := range q {
		a.env.Send(&frames.AgentPrompt{PromptID: p.id, ConversationID: c.id, Internal: p.internal, Text: p.text})
		if p.of != nil {
			p.of.prompt = nil
		}
	}
}

// activatingPending reports whether input that interrupts a wait for target is queued (SPEC
// 13: input is pending until it is delivered as a prompt). target is the call of an exact wait,
// nil for a bare wait.
func (c *conversation) activatingPending(target *call) bool {
	for _, p := range c.queue {
		if p.activating && interrupts(p, target) {
			return true
		}
	}
	return false
}

// interrupts reports whether prompt p interrupts a wait for target (nil: a bare wait). A
// call's own completion prompt never interrupts a wait for it, and completion prompts — what a
// bare wait is there to consume — never interrupt a bare wait.
func interrupts(p *prompt, target *call) bool {
	if p.of == nil {
		return true
	}
	return target != nil && p.of != target
}

// unqueue removes a call's undelivered completion prompt (its result was consumed first).
func (c *conversation) unqueue(p *prompt) {
	for i, q := range c.queue {
		if q == p {
			c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
			return
		}
	}
}

// createConversation answers conversation.create (SPEC 13).
func (a *Agent) createConversation(f *frames.ConversationCreate) {
	parent := a.conversation(f.ParentConversationID, f.ID)
	if parent == nil {
		return
	}
	var pc *call
	if f.ParentCallID != "" {
		pc = parent.calls[f.ParentCallID]
		if pc == nil || pc.builtin {
			a.sendError(f.ID, frames.Errorf(frames.CodeUnknownCall, "conversation %s has no tool call %q to stand for the sub-agent", parent.id, f.ParentCallID))
			return
		}
	}
	c := newConversation(a.nextID("conv_"), parent, pc)
	c.inTurn = a.opts.PromptsInResults
	c.cancelled = parent.cancelled || (pc != nil && pc.cancelledEnd())
	a.convs[c.id] = c
	a.order = append(a.order, c)
	a.env.Send(&frames.ConversationCreated{Reply: frames.Reply{Ref: f.ID}, ConversationID: c.id})
}

// cancelConversation answers conversation.cancel: every open call of the conversation and of
// its descendants is closed with parent_cancelled, and nothing of them reaches the parent any
// more (SPEC 11).
func (a *Agent) cancelConversation(f *frames.ConversationCancel) {
	c := a.conversation(f.ConversationID, f.ID)
	if c == nil {
		return
	}
	if c.parent == nil {
		a.sendError(f.ID, frames.Errorf(frames.CodeForbidden, "the root conversation cannot be cancelled; use session.end"))
		return
	}
	a.env.Notice("conversation cancellation request", map[string]any{"conversation_id": c.id})
	a.cancelTree(c)
}

// cancelTree marks c and its descendants cancelled and closes their open calls.
func (a *Agent) cancelTree(c *conversation) {
	var open []*call
	var walk func(x *conversation)
	walk = func(x *conversation) {
		x.cancelled = true
		x.queue = nil
		for _, k := range x.calls {
			if !k.builtin && !k.finished && k.brokerID != "" {
				open = append(open, k)
			}
		}
		for _, ch := range x.children {
			walk(ch)
		}
	}
	walk(c)
	for _, k := range open {
		if k.finished {
			continue // closed by the cascade of an earlier one
		}
		if _, err := a.env.CancelCall(k.brokerID, frames.CancelParentCancelled); err != nil {
			a.env.Notice("conversation cancellation failed", map[string]any{"call_id": k.brokerID, "error": err.Error()})
		}
	}
}

// cancelChildrenOf marks the conversations a cancelled or timed-out call stood for as
// cancelled: their jobs are closed by the engine's cascade, and nothing of them may reach the
// parent any more.
func (a *Agent) cancelChildrenOf(k *call) {
	for _, c := range a.convs {
		if c.parentCall == k && !c.cancelled {
			var walk func(x *conversation)
			walk = func(x *conversation) {
				x.cancelled = true
				x.queue = nil
				for _, ch := range x.children {
					walk(ch)
				}
			}
			walk(c)
		}
	}
}

// message answers agent.message with agent.message_committed and delivers it to the target
// conversation as activating input (SPEC 13).
func (a *Agent) message(f *frames.AgentMessage) {
	from := a.conversation(f.ConversationID, f.ID)
	if from == nil {
		return
	}
	to := a.conversation(f.ToConversationID, f.ID)
	if to == nil {
		return
	}
	id := a.nextID("msg_")
	a.env.Send(&frames.AgentMessageCommitted{Reply: frames.Reply{Ref: f.ID}, MessageID: id})
	if from.cancelled {
		return
	}
	a.enqueue(to, &prompt{text: MessagePrompt(from.id, f.Text), activating: true})
}

// final delivers a child's final response to its watching parent (SPEC 13).
func (a *Agent) final(f *frames.AgentFinal) {
	c := a.conversation(f.ConversationID, f.ID)
	if c == nil || c.parent == nil || c.cancelled {
		return
	}
	a.enqueue(c.parent, &prompt{text: WatchFinalPrompt(c.id, f.Text), activating: true})
}
