package broker

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// AgentPort attaches a text agent that speaks no frames — the MCP facade (SPEC 14) — to a
// session's root conversation. Every call blocks until its result; every result carries the
// prompts queued for the session (header pending_prompts), as MCP has no turns.
type AgentPort struct {
	s *Session
	t *textAgent

	// Owned by the session's event loop.
	waiting map[string]*portCall // open calls by the agent's call id
	closed  bool
	onTools func([]ToolInfo) // told the session's tools after every declaration
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

// ErrAgentAttached is returned when the session already has a text agent or a caller.
var ErrAgentAttached = errors.New("broker: the session already has a text agent or a caller")

// AttachAgent attaches a port to a session of tenant (a new session when sessionID is ""). It
// answers ErrUnknownSession for a session the tenant cannot see.
func (n *Node) AttachAgent(tenant, sessionID string) (*AgentPort, error) {
	var s *Session
	if sessionID == "" {
		var err error
		if s, err = n.CreateSession(tenant, ModelConfig{}); err != nil {
			return nil, err
		}
	} else if s = n.session(sessionID); s == nil || s.tenant != tenant {
		return nil, ErrUnknownSession
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
		if s.agent != nil || s.caller != nil || s.port != nil {
			reply <- result{nil, ErrAgentAttached}
			return
		}
		p := &AgentPort{s: s, waiting: make(map[string]*portCall)}
		p.t = &textAgent{s: s, port: p}
		p.t.a = textagent.New(p.t, textagent.Options{BackgroundAfter: s.node.cfg.BackgroundAfter, PromptsInResults: true})
		s.port, s.text = p, p.t
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

// OnToolsChanged registers fn to learn the session's host tools after every declaration. fn
// runs on its own goroutine.
func (p *AgentPort) OnToolsChanged(fn func([]ToolInfo)) {
	p.s.post(func() { p.onTools = fn })
}

// toolsChanged tells the listener the session's tools.
func (p *AgentPort) toolsChanged() {
	if p.onTools == nil || p.closed {
		return
	}
	tools := p.s.toolInfos()
	fn := p.onTools
	go fn(tools)
}

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
// while the call is open. When ctx ends first the call is cancelled (agent_request) — except
// a wait, which only stops waiting (SPEC 14).
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
			pc.result <- frames.AgentToolResult{CallID: callID, Kind: frames.ResultKindError,
				Content: textagent.ErrorResult("the session has ended").String()}
			return
		}
		p.waiting[callID] = pc
		p.t.a.Handle(&frames.AgentToolCall{CallID: callID, ConversationID: textagent.RootConversation, Name: name, Arguments: args})
	}) {
		return frames.AgentToolResult{}, ErrUnknownSession
	}
	select {
	case r, ok := <-pc.result:
		if !ok {
			return frames.AgentToolResult{}, ErrUnknownSession
		}
		return r, nil
	case <-ctx.Done():
		s.post(func() {
			delete(p.waiting, callID)
			if name == "wait" {
				p.t.a.CancelWait(textagent.RootConversation, callID)
				return
			}
			if brokerID, ok := p.t.a.Running(textagent.RootConversation, callID); ok {
				if _, _, err := s.engine().Cancel(s.ctx(), s.addr(brokerID), frames.CancelAgentRequest); err != nil {
					s.node.log.Warn("broker: cancelling a cancelled MCP call", "call_id", brokerID, "err", err)
				}
			}
		})
		return frames.AgentToolResult{}, ctx.Err()
	}
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

// Close detaches the port (the MCP session ended): the session then lives on for its resume
// window like one whose connections dropped.
func (p *AgentPort) Close() {
	s := p.s
	s.post(func() {
		if p.closed {
			return
		}
		p.closed = true
		for id, pc := range p.waiting {
			delete(p.waiting, id)
			close(pc.result)
		}
		if s.port == p {
			s.port = nil
			if s.text == p.t {
				s.text.ending()
				s.text = nil
			}
		}
		s.armIdle()
	})
}

// callID mints the agent-facing id of an MCP call: its broker call id (SPEC 14).
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
