package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// textAgent connects a session to the text-agent protocol (package textagent): it is the
// protocol's Env, backed by the session's slots, outboxes and job engine.
type textAgent struct {
	s    *Session
	slot *Slot      // the agent's WebSocket slot, or nil for a port
	port *AgentPort // the MCP facade's port, or nil for a WebSocket agent
	a    *textagent.Agent
}

func newTextAgent(s *Session, sl *Slot) *textAgent {
	t := &textAgent{s: s, slot: sl}
	t.a = textagent.New(t, t.options())
	s.agentDirty = true
	return t
}

// options are the text-agent protocol's options: a WebSocket agent's, or, for the conversation
// of MCP clients (no slot), the MCP mode (SPEC 14).
func (t *textAgent) options() textagent.Options {
	return textagent.Options{BackgroundAfter: t.s.node.cfg.BackgroundAfter, PromptsInResults: t.slot == nil}
}

func (t *textAgent) handle(f frames.Frame) { t.s.agentDirty = true; t.a.Handle(f) }
func (t *textAgent) ending()               { t.a.Ending() }

// Now implements textagent.Env.
func (t *textAgent) Now() time.Time { return t.s.now() }

// After implements textagent.Env.
func (t *textAgent) After(d time.Duration, fn func()) func() {
	timer := t.s.after(d, func() { t.s.agentDirty = true; fn() })
	return func() { timer.Stop() }
}

// Send implements textagent.Env: frames go to the agent's slot (kept in its outbox while the
// agent is away).
func (t *textAgent) Send(f frames.Frame) {
	if t.slot == nil {
		// The conversation of MCP clients: a result goes to the request of the attached port
		// that waits for it (none: the request went away with its MCP session).
		if r, ok := f.(*frames.AgentToolResult); ok && t.port != nil {
			t.port.deliver(r)
		}
		return
	}
	if t.slot != nil && t.s.agent == t.slot {
		t.s.send(t.slot, f)
	}
}

// madeBefore answers a WebSocket agent's call whose job exists already (its broker call id is
// derived from the call, jobs.DerivedCallID): the agent sent it again because the node that made
// the job died before the agent heard of it (SPEC 15), and the node that took the session over
// found no open job to adopt — the job ended in between. The call is that job, never a second
// one: the agent hears of its end as of any call's.
func (t *textAgent) madeBefore(nc jobs.NewCall) (string, string) {
	s := t.s
	j, err := s.engine().Reload(s.ctx(), s.addr(nc.CallID))
	if err != nil || j.ConversationID != nc.ConversationID || j.AgentCallID != nc.AgentCallID {
		return "", "Tool call could not be started: the job store failed"
	}
	s.node.log.Info("broker: an agent call sent again names the job made before a takeover",
		"session", s.id, "call_id", j.CallID, "state", j.State)
	if j.State.Terminal() {
		s.post(func() {
			if !s.ended && s.text == t {
				s.agentDirty = true
				agentCallEnded(t.a, j)
			}
		})
	}
	return j.CallID, ""
}

// StartCall implements textagent.Env: the checks of SPEC 4 before dispatch, then the job.
func (t *textAgent) StartCall(r textagent.CallRequest) (string, string) {
	s := t.s
	lim := s.node.cfg.Limits
	if len(r.Arguments) > lim.MaxPayloadBytes {
		return "", fmt.Sprintf("Arguments of %d bytes are over the limit of %d bytes", len(r.Arguments), lim.MaxPayloadBytes)
	}
	if s.openJobs >= lim.MaxOpenJobs {
		return "", fmt.Sprintf("Too many open tool calls in this session (limit %d)", lim.MaxOpenJobs)
	}
	nc := jobs.NewCall{Tenant: s.tenant, SessionID: s.id, Arguments: r.Arguments, ConversationID: r.ConversationID,
		AgentCallID: r.CallID, ParentCallID: r.ParentCallID}
	if t.slot == nil {
		nc.CallID = r.CallID // an MCP client's id of a call is its broker call id (SPEC 14)
	} else {
		nc.CallID = jobs.DerivedCallID(s.id, t.slot.id, r.ConversationID, r.CallID)
	}
	if r.Local {
		nc.Local, nc.Tool = true, jobs.Tool{Name: r.Name}
		j, err := s.engine().Call(s.ctx(), nc)
		if errors.Is(err, jobs.ErrCallExists) && t.slot != nil {
			return t.madeBefore(nc)
		}
		if err != nil {
			return "", "Tool call could not be started: the job store failed"
		}
		s.openJobs++
		return j.CallID, ""
	}
	sl, tool := s.route(r.Name)
	if sl == nil {
		return "", fmt.Sprintf("Tool %s is not available", r.Name)
	}
	if msg := tool.checkArguments(r.Arguments); msg != "" {
		return "", msg
	}
	nc.Slot, nc.Tool = sl.id, tool.Job
	if r.Task {
		nc.TaskTTLMS = taskTTL(tool.Job, r.TaskTTLMS)
	}
	nc.Frame = s.callFrameOut(sl, tool)
	j, err := s.engine().Call(s.ctx(), nc)
	if errors.Is(err, jobs.ErrCallExists) && t.slot != nil {
		return t.madeBefore(nc)
	}
	if err != nil {
		return "", "Tool call could not be started: the job store failed"
	}
	s.openJobs++
	if j.State == jobs.AwaitingPermission {
		// A session without a caller cannot hear spoken permission (SPEC 12).
		d := jobs.Decision{Verdict: jobs.Decline, Reason: "no_caller"}
		if err := s.engine().Permission(s.ctx(), s.addr(j.CallID), d); err != nil {
			s.node.log.Warn("broker: declining a permission call", "call_id", j.CallID, "err", err)
		}
		return "", fmt.Sprintf("Tool %s requires spoken permission", r.Name)
	}
	if j.State == jobs.Pending {
		s.dispatchOut(sl, tool, j, nc.Frame)
	}
	return j.CallID, ""
}

// taskTTL is the ttl of an MCP task of tool (SPEC 14): the ttl asked for in ms, clamped to the
// tool's deferred_timeout or, for a tool that is not deferred, to 10 minutes; absent (0 or
// less), the clamp itself.
func taskTTL(tool jobs.Tool, asked int64) int64 {
	limit := maxUndeferredTaskTTL
	if tool.Deferred {
		limit = tool.DeferredTimeout
		if limit <= 0 {
			limit = jobs.DefaultDeferredTimeout
		}
	}
	if asked <= 0 || asked > limit.Milliseconds() {
		return limit.Milliseconds()
	}
	return asked
}

// maxUndeferredTaskTTL bounds the ttl of a task of a tool that is not deferred (SPEC 14).
const maxUndeferredTaskTTL = 10 * time.Minute

// LocalResult implements textagent.Env.
func (t *textAgent) LocalResult(brokerID string, output json.RawMessage, errText string, isError bool) error {
	_, err := t.s.engine().Result(t.s.ctx(), t.s.addr(brokerID), output, errText, isError)
	return err
}

// CancelCall implements textagent.Env.
func (t *textAgent) CancelCall(brokerID string, reason frames.CancelReason) (frames.CancelResult, error) {
	res, j, err := t.s.engine().Cancel(t.s.ctx(), t.s.addr(brokerID), reason)
	if res == frames.CancelResultAlreadyCanceled && reason == frames.CancelAgentRequest && j != nil &&
		j.CancelReason == string(frames.CancelAgentRequest) {
		// Cancelled at the agent's request, though the agent's state — which asks only for a
		// call whose cancel it has not accepted — never took the request: a node applied it and
		// died before its answer was journaled (SPEC 15). This is that cancel, sent again.
		return frames.CancelResultCancelled, nil
	}
	return res, err
}

// AnswerInteraction implements textagent.Env: the host of the job gets tool_interaction_answer.
func (t *textAgent) AnswerInteraction(brokerID, interactionID, option, text string) (frames.InteractionUpdateResult, error) {
	return t.s.answerInteraction(brokerID, interactionID, option, text)
}

// Notice implements textagent.Env.
func (t *textAgent) Notice(text string, detail map[string]any) {
	d := map[string]any{"text": text}
	for k, v := range detail {
		d[k] = v
	}
	t.s.record(jobs.KindNotice, d)
}

// answerInteraction closes an interaction with the caller's or agent's answer and tells the
// job's host (SPEC 9).
func (s *Session) answerInteraction(callID, interactionID, option, text string) (frames.InteractionUpdateResult, error) {
	a := s.addr(callID)
	res, err := s.engine().AnswerInteraction(s.ctx(), a, interactionID, jobs.Answer{Option: option, Text: text})
	if err != nil || res != frames.UpdateApplied {
		return res, err
	}
	j, err := s.engine().Lookup(s.ctx(), a)
	if err == nil {
		if sl := s.slots[j.Slot]; sl != nil {
			s.send(sl, &frames.ToolInteractionAnswer{CallID: j.CallID, Handle: j.Handle, InteractionID: interactionID, Option: option, Text: text})
		}
	}
	return res, nil
}
