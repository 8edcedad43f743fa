package textagent

import (
	"encoding/json"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// Env is what the agent-role protocol needs from its session. Every method is called from the
// session's own event loop, and so are the functions After schedules.
type Env interface {
	// Now is the time.
	Now() time.Time
	// After runs fn on the session's event loop after d; stop cancels it.
	After(d time.Duration, fn func()) (stop func())
	// Send sends a frame to the text agent.
	Send(f frames.Frame)
	// StartCall starts a call of a host tool, or of a local call (Local set): it creates the
	// job and dispatches it. A non-empty errText answers the call at once with that error.
	StartCall(r CallRequest) (brokerID, errText string)
	// LocalResult reports the outcome of a local call.
	LocalResult(brokerID string, output json.RawMessage, errText string, isError bool) error
	// CancelCall cancels a job (its tool_cancel, agent.local_cancel and cascade follow).
	CancelCall(brokerID string, reason frames.CancelReason) (frames.CancelResult, error)
	// AnswerInteraction closes an interaction of a job with the agent's answer.
	AnswerInteraction(brokerID, interactionID, option, text string) (frames.InteractionUpdateResult, error)
	// Notice records a notice on the session's timeline.
	Notice(text string, detail map[string]any)
}

// CallRequest is a call the agent made of a host tool (or a local call).
type CallRequest struct {
	ConversationID string
	CallID         string // the agent's own id
	Name           string
	Arguments      json.RawMessage
	Local          bool
	// ParentCallID is the broker call id of the call that stands for the sub-agent of the
	// conversation (or of its nearest ancestor that has one): the job's parent (SPEC 11).
	ParentCallID string
	// TaskTTLMS is, for an MCP task (Agent.TaskCall), the ttl it asked for in ms (0: none given).
	TaskTTLMS int64
	// Task marks the call of an MCP task.
	Task bool
}

// Outcome is how a job ended, as its conversation learns it.
type Outcome struct {
	State    jobs.State
	Output   json.RawMessage
	Error    string
	Duration time.Duration // from the call to its end
	// CancelReason is why a cancelled or timed-out job ended (SPEC 11).
	CancelReason frames.CancelReason
}

// Options configure an Agent.
type Options struct {
	// BackgroundAfter is when an unfinished call goes to the background (SPEC 13; default 2 s).
	BackgroundAfter time.Duration
	// MinWaitMinutes and MaxWaitMinutes clamp `wait {timeout_minutes}` (default 5 and 1440).
	MinWaitMinutes, MaxWaitMinutes int
	// PromptsInResults is the MCP mode (SPEC 14): there are no turns and no prompt frames;
	// every result is a delivery point that carries all prompts queued for the session in the
	// header pending_prompts.
	PromptsInResults bool
}

// RootConversation is the id of every session's root conversation (SPEC 13).
const RootConversation = "root"

// Agent is the state of a session's text agent (SPEC 13): its conversations, its calls and
// their results, the waits, the prompt queues and the status rules. It does no I/O itself: it
// acts through its Env and is driven by the session's event loop.
type Agent struct {
	env   Env
	opts  Options
	convs map[string]*conversation
	order []*conversation  // every conversation, oldest first
	jobs  map[string]*call // by broker call id
	open  map[string]*openInteraction
	seq   int

	settled          []SettledCall // the settled calls, in the order they settled
	journaledSettled int           // how many of settled ExportJournal has given
	settledReset     bool          // a settled call changed: ExportJournal gives them all again
	exportScratch    []*call       // exportLive's list of a conversation's calls, reused
}

// New returns the text-agent state of a session with its root conversation.
func New(env Env, opts Options) *Agent {
	if opts.BackgroundAfter <= 0 {
		opts.BackgroundAfter = 2 * time.Second
	}
	if opts.MinWaitMinutes <= 0 {
		opts.MinWaitMinutes = 5
	}
	if opts.MaxWaitMinutes <= 0 {
		opts.MaxWaitMinutes = 1440
	}
	a := &Agent{env: env, opts: opts, convs: make(map[string]*conversation), jobs: make(map[string]*call), open: make(map[string]*openInteraction)}
	root := newConversation(RootConversation, nil, nil)
	root.inTurn = opts.PromptsInResults // no turns: prompts wait for the next result
	a.convs[RootConversation] = root
	a.order = append(a.order, root)
	return a
}

// nextID mints an id with prefix, unique within the session.
func (a *Agent) nextID(prefix string) string {
	a.seq++
	return prefix + itoa(a.seq) + "_" + randomSuffix()
}

// Handle runs one frame from the text agent.
func (a *Agent) Handle(f frames.Frame) {
	switch f := f.(type) {
	case *frames.AgentToolCall:
		a.toolCall(f)
	case *frames.AgentTurnStart:
		if c := a.conversation(f.ConversationID, f.ID); c != nil {
			c.inTurn = true
		}
	case *frames.AgentTurnEnd:
		if c := a.conversation(f.ConversationID, f.ID); c != nil {
			c.inTurn = false
			a.flush(c)
		}
	case *frames.AgentMessage:
		a.message(f)
	case *frames.AgentLocalResult:
		a.localResult(f)
	case *frames.AgentInteractionAnswer:
		a.interactionAnswer(f)
	case *frames.AgentFinal:
		a.final(f)
	case *frames.ConversationCreate:
		a.createConversation(f)
	case *frames.ConversationCancel:
		a.cancelConversation(f)
	default:
		a.sendError(refOf(f), frames.Errorf(frames.CodeBadFrame, "%s is not a text-agent frame", f.FrameType()))
	}
}

// conversation returns a live conversation, or answers the frame with not_found.
func (a *Agent) conversation(id, ref string) *conversation {
	c := a.convs[id]
	if c == nil {
		a.sendError(ref, frames.Errorf(frames.CodeNotFound, "no conversation %q", id))
		return nil
	}
	return c
}

func (a *Agent) sendError(ref string, e *frames.Error) {
	e.Ref = ref
	a.env.Send(e)
}

func refOf(f frames.Frame) string {
	if r, ok := f.(interface{ RequestID() string }); ok {
		return r.RequestID()
	}
	return ""
}

// result sends an agent.tool_result for call id of content.
func (a *Agent) result(id string, c Content) {
	kind := frames.ResultKindResult
	if c.IsError() {
		kind = frames.ResultKindError
	}
	a.deliver(id, kind, c)
}

// deliver sends a result, carrying the pending prompts in MCP mode.
func (a *Agent) deliver(id string, kind frames.ToolResultKind, c Content) {
	if a.opts.PromptsInResults {
		if texts := a.takePrompts(); len(texts) > 0 {
			c.Set(HeaderPendingPrompts, PendingPrompts(texts))
		}
	}
	a.env.Send(&frames.AgentToolResult{CallID: id, Kind: kind, Content: c.String()})
}

// takePrompts delivers every queued prompt of the session (MCP mode), oldest conversation
// first, each queue in order. It allocates nothing when no prompt is queued (every MCP result
// asks).
func (a *Agent) takePrompts() []string {
	var texts []string
	for _, c := range a.order {
		for _, p := range c.queue {
			texts = append(texts, p.text)
			if p.of != nil {
				p.of.prompt = nil
			}
		}
		c.queue = nil
	}
	return texts
}

// Ending forgets everything at the end of the session or of the agent's slot: timers stop,
// waits are abandoned.
func (a *Agent) Ending() {
	for _, c := range a.convs {
		for _, k := range c.calls {
			k.stopTimer()
		}
		if c.timed != nil {
			c.timed.stop()
		}
	}
}
