package broker

import (
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// clientError sends an error frame about a client's frame to its slot.
func (s *Session) clientError(c *Client, e *frames.Error) {
	if s.ended || c.slot.client != c {
		return
	}
	s.send(c.slot, e)
}

// handleFrame runs one decoded client frame (SPEC 2: every frame is answered or applied; a
// frame that cannot be applied gets an error frame and changes nothing).
func (s *Session) handleFrame(c *Client, f frames.Frame, at time.Time) {
	if s.ended || c.slot.client != c {
		return
	}
	s.welcomeReceived(c)
	sl := c.slot
	ref := requestID(f) // a frame of the broker's never gets here: frames.DecodeClient refused it
	if !allowed(sl.role, f.FrameType()) {
		s.sendError(sl, ref, frames.Errorf(frames.CodeForbidden, "%s may not be sent on a connection of role %s", f.FrameType(), sl.role))
		return
	}
	if callID, handle, ok := ownerOf(f); ok {
		if e := s.notOwner(sl, callID, handle); e != nil {
			s.sendError(sl, ref, e)
			return
		}
	}
	switch f := f.(type) {
	case *frames.Hello:
		s.sendError(sl, f.ID, frames.Errorf(frames.CodeBadFrame, "hello was already sent on this connection"))
	case *frames.ToolsDeclare:
		s.declare(sl, f.ID, f.Tools)
	case *frames.ToolDeferred:
		s.deferCall(sl, f)
	case *frames.ToolProgress:
		s.progress(sl, f)
	case *frames.ToolPartialResult:
		s.partial(sl, f)
	case *frames.ToolResult:
		s.result(sl, f)
	case *frames.JobCancel:
		if !s.callerMayCancel(sl, f) {
			s.unreachableCancel(sl, f)
			return
		}
		s.jobCancel(sl, f)
	case *frames.ToolInteractionUpdate:
		s.interactionUpdate(sl, f)
	case *frames.Inject:
		s.inject(sl, f)
	case *frames.SessionEnd:
		s.end(endEnded)
	case *frames.CallerText:
		s.callerText(sl, f, at)
	default:
		if s.text != nil && sl == s.agent {
			s.text.handle(f)
			return
		}
		s.sendError(sl, ref, frames.Errorf(frames.CodeBadFrame, "%s is not supported in this session", f.FrameType()))
	}
}

// roleFrames lists the client frames each role may send.
var roleFrames = map[frames.Role]map[string]bool{
	frames.RoleHost: set("hello", "tools.declare", "tool_deferred", "tool_progress", "tool_partial_result",
		"tool_result", "job.cancel", "tool_interaction_update", "inject", "session.end"),
	// A caller may also be a host (the browser SDK): it may send every host frame.
	frames.RoleCaller: set("hello", "caller.text", "tools.declare", "tool_deferred", "tool_progress",
		"tool_partial_result", "tool_result", "job.cancel", "tool_interaction_update", "inject", "session.end"),
	frames.RoleAgent: set("hello", "agent.tool_call", "agent.turn_start", "agent.turn_end", "agent.message",
		"agent.local_result", "agent.interaction_answer", "agent.final", "conversation.create",
		"conversation.cancel", "job.cancel", "session.end"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func allowed(role frames.Role, typ string) bool { return roleFrames[role][typ] }
