package broker

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// AgentPort attaches a text agent that speaks no frames — an MCP session of the MCP facade
// (SPEC 14) — to a session's root conversation. Every call blocks until its result; every
// result carries the prompts queued for the session (header pending_prompts), as MCP has no
// turns. The conversation is the session's, not the port's: when the port is detached (the MCP
// session ended, or another one took the conversation over) its background calls, queued
// results, prompts and tasks stay for the next agent of the session.
type AgentPort struct {
	s *Session
	t *textAgent

	// done is closed once the port is detached: by Close, a takeover, or the session's end.
	done chan struct{}
	// takenOver is set before done is closed when another MCP session took the conversation.
	takenOver atomic.Bool
	// tools delivers the session's tools to the OnToolsChanged listener, in order.
	tools toolsNotifier

	chMu    sync.Mutex
	changes chan struct{} // closed (and replaced) when a job of one of the conversation's tasks changes

	// Owned by the session's event loop.
	waiting map[string]*portCall // open calls by the agent's call id
	closed  bool
}

// toolsNotifier hands the latest tool list to a listener on a goroutine of its own, one list at
// a time and in order: a list that is superseded before it was delivered is skipped.
type toolsNotifier struct {
	mu      sync.Mutex
	fn      func([]ToolInfo)
	pending []ToolInfo
	has     bool // pending is to be delivered
	running bool // a goroutine is delivering
}

// notify queues tools for the listener.
func (n *toolsNotifier) notify(tools []ToolInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fn == nil {
		return
	}
	n.pending, n.has = tools, true
	if !n.running {
		n.running = true
		go n.run()
	}
}

func (n *toolsNotifier) run() {
	for {
		n.mu.Lock()
		if !n.has {
			n.running = false
			n.mu.Unlock()
			return
		}
		tools, fn := n.pending, n.fn
		n.pending, n.has = nil, false
		n.mu.Unlock()
		fn(tools)
	}
}

// portCall is one open call of the port.
type portCall struct {
	result   chan frames.AgentToolResult
	progress func(note string)
	target   string // for a wait: the call it waits for
}

// ToolInfo describes a tool the port's agent may call.
type ToolInfo struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ErrAgentAttached is returned when the session already has a WebSocket text agent or a caller.
var ErrAgentAttached = errors.New("broker: the session already has a text agent or a caller")

// ErrTakenOver is returned by a call that was open when another MCP session took its
// conversation over (SPEC 14).
var ErrTakenOver = errors.New("broker: session taken over")

// AttachAgent attaches a port to the root conversation of a session of tenant (a new session
// when sessionID is ""). A port attached already — another MCP session's — is detached first:
// the conversation is taken over (SPEC 14), its open calls end with ErrTakenOver. It answers
// ErrUnknownSession for a session the tenant cannot see, and ErrAgentAttached for one with a
// WebSocket agent or a caller.
func (n *Node) AttachAgent(tenant, sessionID string) (*AgentPort, error) {
	var s *Session
	if sessionID == "" {
		var err error
		if s, err = n.CreateSession(tenant, ModelConfig{}); err != nil {
			return nil, err
		}
	} else if loc := n.locate(n.ctx, sessionID); loc.place != placeHere || loc.session.tenant != tenant {
		return nil, ErrUnknownSession // elsewhere (the facade forwards it), ended, or not the tenant's
	} else {
		s = loc.session
	}
	type result struct {
		p   *AgentPort
		err error
	}
	reply := make(chan result, 1)
	if !s.post(func() {
		if s.ended {
			reply <- result{nil, ErrUnknownSession}
			return
		}
		if s.agent != nil || s.caller != nil {
			reply <- result{nil, ErrAgentAttached}
			return
		}
		if old := s.port; old != nil {
			old.takenOver.Store(true)
			old.detach() // its open calls return ErrTakenOver and are abandoned
			s.port = nil
		}
		t := s.text
		if t == nil || t.slot != nil {
			t = &textAgent{s: s}
			t.a = textagent.New(t, t.options())
			s.agentDirty = true
			defer s.saveJournal() // the record says the session has a text agent: its state is journaled
		}
		p := &AgentPort{s: s, t: t, waiting: make(map[string]*portCall), done: make(chan struct{}), changes: make(chan struct{})}
		t.port = p
		s.port, s.text = p, t
		s.stopIdle()
		reply <- result{p, nil}
	}) {
		return nil, ErrUnknownSession
	}
	r := <-reply
	return r.p, r.err
}

// ErrUnknownSession is returned for a session that does not exist, ended, or belongs to
// another tenant.
var ErrUnknownSession = errors.New("broker: no such session")

// OnToolsChanged registers fn to learn the session's host tools whenever they change (a
// declaration, a slot that expired), starting with the tools of now. fn runs on a goroutine of
// its own, one call at a time, with the lists in order (a list superseded before fn could be
// called is skipped).
func (p *AgentPort) OnToolsChanged(fn func([]ToolInfo)) {
	p.tools.mu.Lock()
	p.tools.fn = fn
	p.tools.mu.Unlock()
	p.s.post(p.toolsChanged)
}

// toolsChanged tells the listener the session's tools.
func (p *AgentPort) toolsChanged() {
	if p.closed {
		return
	}
	p.tools.notify(p.s.toolInfos())
}

// Done is closed once the port is detached: by Close, by a takeover (TakenOver), or when its
// session ends (SPEC 3.6). The MCP session of a port whose Done is closed has nothing left to
// serve.
func (p *AgentPort) Done() <-chan struct{} { return p.done }

// TakenOver reports whether the port was detached because another MCP session took its
// conversation over (SPEC 14).
func (p *AgentPort) TakenOver() bool { return p.takenOver.Load() }

// SessionID is the port's session.
func (p *AgentPort) SessionID() string { return p.s.id }

// Tools lists the session's host tools (the agent also has wait, cancel and status).
func (p *AgentPort) Tools(ctx context.Context) []ToolInfo {
	reply := make(chan []ToolInfo, 1)
	if !p.s.post(func() { reply <- p.s.toolInfos() }) {
		return nil
	}
	select {
	case r := <-reply:
		return r
	case <-ctx.Done():
		return nil
	}
}

// Call runs one call of the agent (a host tool, or wait, cancel, status) with the agent's own
// id, and returns its agent.tool_result. progress, if set, receives the job's progress notes
// while the call is open; it runs on the session's event loop and must not block. A call of a
// port whose session has ended is answered with an error result.
//
// When ctx ends first, or the port is detached while the call is open (Close: the MCP session
// ended; a takeover), the request is abandoned: a host or local call is cancelled
// (agent_request), a wait only stops waiting (SPEC 14); Call then returns ctx.Err(),
// ErrTakenOver or ErrPortClosed.
func (p *AgentPort) Call(ctx context.Context, callID, name string, args json.RawMessage, progress func(string)) (frames.AgentToolResult, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	pc := &portCall{result: make(chan frames.AgentToolResult, 1), progress: progress}
	if name == "wait" {
		var a struct {
			ID string `json:"tool_call_id"`
		}
		_ = json.Unmarshal(args, &a)
		pc.target = a.ID
	}
	s := p.s
	if !s.post(func() {
		if p.closed || s.ended {
			pc.result <- endedResult(callID)
			return
		}
		p.waiting[callID] = pc
		p.t.handle(&frames.AgentToolCall{CallID: callID, ConversationID: textagent.RootConversation, Name: name, Arguments: args})
	}) {
		return endedResult(callID), nil
	}
	select {
	case r, ok := <-pc.result:
		if ok {
			return r, nil
		}
		p.abandon(callID, name)
		if err := ctx.Err(); err != nil {
			return frames.AgentToolResult{}, err
		}
		if p.TakenOver() {
			return frames.AgentToolResult{}, ErrTakenOver
		}
		return frames.AgentToolResult{}, ErrPortClosed
	case <-ctx.Done():
		p.abandon(callID, name)
		return frames.AgentToolResult{}, ctx.Err()
	}
}

// ErrPortClosed is returned by a call that was open when its port was detached.
var ErrPortClosed = errors.New("broker: the MCP session ended")

// endedResult answers a call of a port whose session has ended.
func endedResult(callID string) frames.AgentToolResult {
	return frames.AgentToolResult{CallID: callID, Kind: frames.ResultKindError,
		Content: textagent.ErrorResult("the session has ended").String()}
}

// abandon withdraws a call whose request went away (SPEC 14): a wait stops waiting and
// consumes nothing; a running host or local call is cancelled with reason agent_request.
func (p *AgentPort) abandon(callID, name string) {
	s := p.s
	s.post(func() {
		delete(p.waiting, callID)
		s.agentDirty = true
		if name == "wait" {
			p.t.a.CancelWait(textagent.RootConversation, callID)
			return
		}
		if brokerID, ok := p.t.a.Running(textagent.RootConversation, callID); ok {
			if _, _, err := s.engine().Cancel(s.ctx(), s.addr(brokerID), frames.CancelAgentRequest); err != nil {
				s.node.log.Warn("broker: cancelling an abandoned MCP call", "call_id", brokerID, "err", err)
			}
		}
	})
}

// deliver hands an agent.tool_result to the call waiting for it.
func (p *AgentPort) deliver(r *frames.AgentToolResult) {
	if pc := p.waiting[r.CallID]; pc != nil {
		delete(p.waiting, r.CallID)
		pc.result <- *r
	}
}

// progress forwards a job's progress note to the open requests about it: the call itself, or
// a wait for it.
func (p *AgentPort) progress(brokerID, note string) {
	conv, id, ok := p.t.a.CallOf(brokerID)
	if !ok || conv != textagent.RootConversation {
		return
	}
	for cid, pc := range p.waiting {
		if pc.progress != nil && (cid == id || pc.target == id) {
			pc.progress(note)
		}
	}
}

// Close detaches the port (the MCP session ended: DELETE, idle): the calls still open are
// abandoned (see Call). The conversation stays — background calls go on, their results stay
// queued for the next agent of the session (SPEC 14) — and the session lives on for its resume
// window like one whose connections dropped.
func (p *AgentPort) Close() {
	s := p.s
	s.post(func() {
		if p.closed {
			return
		}
		p.detach()
		if s.port == p {
			s.port = nil
			if p.t.port == p {
				p.t.port = nil
			}
		}
		s.armIdle()
	})
}

// detach marks the port closed, releases the calls still open (they return ErrPortClosed) and
// closes Done. It runs on the session's event loop.
func (p *AgentPort) detach() {
	if p.closed {
		return
	}
	p.closed = true
	for id, pc := range p.waiting {
		delete(p.waiting, id)
		close(pc.result)
	}
	close(p.done)
}

// sessionEnded answers every call still open with an error result and closes Done: the session
// ended (SPEC 3.6), so nothing it waits for can come any more. It runs on the session's event
// loop, after the session's open jobs were cancelled (their calls got their results then).
func (p *AgentPort) sessionEnded() {
	if p.closed {
		return
	}
	for id, pc := range p.waiting {
		delete(p.waiting, id)
		pc.result <- endedResult(id)
	}
	p.detach()
}

// newPortCallID mints the agent-facing id of an MCP call: its broker call id (SPEC 14).
func newPortCallID() string { return jobs.NewCallID() }

// NewCallID mints the id of a port call: the broker call id its job will have.
func (p *AgentPort) NewCallID() string { return newPortCallID() }

// toolInfos lists the session's host tools by name.
func (s *Session) toolInfos() []ToolInfo {
	seen := map[string]bool{}
	var out []ToolInfo
	for _, sl := range s.slots {
		for name, t := range sl.tools {
			if !seen[name] {
				seen[name] = true
				out = append(out, ToolInfo{Name: name, Description: t.Decl.Description, Parameters: t.Decl.Parameters})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// agentText is the text-agent side of a WebSocket agent that attaches with slot sl: a
// conversation that MCP clients left (SPEC 14: their background calls' results stay for the
// next agent of the session, MCP or frames) is continued in the WebSocket mode; otherwise a
// new one starts.
func (s *Session) agentText(sl *Slot) *textAgent {
	old := s.text
	t := newTextAgent(s, sl)
	if old != nil && old.slot == nil && old.port == nil {
		t.a = textagent.Restore(t, t.options(), old.a.Export())
		old.ending()
	}
	return t
}

// portText is the text-agent side of the conversation of MCP clients (no slot, no port yet)
// restored from st: the session was taken over by this node (SPEC 15).
func (s *Session) portText(st textagent.State) *textAgent {
	t := &textAgent{s: s}
	t.a = textagent.Restore(t, t.options(), st)
	return t
}

// taskChanged wakes whoever waits for a change of the conversation's tasks (Changes).
func (p *AgentPort) taskChanged() {
	p.chMu.Lock()
	close(p.changes)
	p.changes = make(chan struct{})
	p.chMu.Unlock()
}

// Changes returns a channel that is closed at the next change of a job of one of the
// conversation's tasks (its state, its progress, its interactions).
func (p *AgentPort) Changes() <-chan struct{} {
	p.chMu.Lock()
	defer p.chMu.Unlock()
	return p.changes
}

// StartTask starts a task-augmented call of a host tool (SPEC 14, MCP Tasks) with the agent's
// id callID (its broker call id): a background call from the start, with no placeholder and no
// completion prompt. ttlMS is the ttl the client asked for (0: none), clamped by the broker.
// A non-empty errText means no task was made: the call failed at once (its error result, as
// the call would have answered).
func (p *AgentPort) StartTask(ctx context.Context, callID, name string, args json.RawMessage, ttlMS int64) (errText string, err error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return portDo(ctx, p, func() (string, error) {
		s := p.s
		s.agentDirty = true
		_, errText := p.t.a.TaskCall(callID, name, args, ttlMS)
		if errText != "" {
			return textagent.ErrorResult(errText).String(), nil
		}
		return "", nil
	})
}

// portDo runs fn on the session's event loop while the port is attached and returns its
// answer: ErrPortClosed (or ErrTakenOver) once it is not, ErrUnknownSession once the session
// ended.
func portDo[T any](ctx context.Context, p *AgentPort, fn func() (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	reply := make(chan answer, 1)
	var zero T
	if !p.s.post(func() {
		switch {
		case p.s.ended:
			reply <- answer{zero, ErrUnknownSession}
		case p.closed && p.TakenOver():
			reply <- answer{zero, ErrTakenOver}
		case p.closed:
			reply <- answer{zero, ErrPortClosed}
		default:
			v, err := fn()
			reply <- answer{v, err}
		}
	}) {
		return zero, ErrUnknownSession
	}
	select {
	case a := <-reply:
		return a.v, a.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Tasks lists the ids of the conversation's tasks, oldest first (the conversation's state,
// journaled like a WebSocket agent's: SPEC 15).
func (p *AgentPort) Tasks(ctx context.Context) ([]string, error) {
	return portDo(ctx, p, func() ([]string, error) { return p.t.a.Tasks(), nil })
}

// Task reads the job of the conversation's task callID from the store: a task's state is its
// job's, on whichever node asks (SPEC 14, 15). It answers jobs.ErrUnknownCall for a call that
// is not a task of the session.
func (p *AgentPort) Task(ctx context.Context, callID string) (*jobs.Job, error) {
	j, err := p.s.engine().Reload(ctx, p.s.addr(callID))
	if err != nil {
		return nil, err
	}
	if j.SessionID != p.s.id || j.TaskTTLMS <= 0 || j.ConversationID != textagent.RootConversation {
		return nil, jobs.ErrUnknownCall
	}
	return j, nil
}

// Timeline reads the session's timeline from the store (a task's status message is its
// latest progress note or milestone).
func (p *AgentPort) Timeline(ctx context.Context) ([]jobs.Entry, error) {
	return p.s.engine().Timeline(ctx, p.s.tenant, p.s.id, 0)
}

// ConsumeTask marks the result of the finished task callID consumed, as a wait would: a later
// wait for it answers that it was consumed (SPEC 14: tasks/result). It returns the prompts
// queued for the session, which the answer delivers (header pending_prompts).
func (p *AgentPort) ConsumeTask(ctx context.Context, callID string) ([]string, error) {
	return portDo(ctx, p, func() ([]string, error) {
		p.s.agentDirty = true
		return p.t.a.ConsumeTask(callID), nil
	})
}

// CancelTask cancels the job of task callID (tool_cancel reason agent_request, exactly once:
// SPEC 14) and answers what the job engine did.
func (p *AgentPort) CancelTask(ctx context.Context, callID string) (frames.CancelResult, error) {
	return portDo(ctx, p, func() (frames.CancelResult, error) {
		s := p.s
		res, _, err := s.engine().Cancel(s.ctx(), s.addr(callID), frames.CancelAgentRequest)
		return res, err
	})
}

// AnswerInteraction answers the open interaction of the task callID for the agent (an MCP
// client's elicitation answer): the host gets tool_interaction_answer (SPEC 9, 14).
func (p *AgentPort) AnswerInteraction(ctx context.Context, callID, interactionID, option, text string) (frames.InteractionUpdateResult, error) {
	return portDo(ctx, p, func() (frames.InteractionUpdateResult, error) {
		return p.s.answerInteraction(callID, interactionID, option, text)
	})
}
