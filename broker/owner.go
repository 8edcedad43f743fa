package broker

import "github.com/backchannel-io/backchannel/frames"

// This file holds who may act for a job (SPEC 11): the frames that act for the host are
// accepted only from the slot the call was dispatched to, and a connection attached with the
// caller token reaches with job.cancel only its own jobs and those the caller may cancel by
// voice.

// notOwner answers a frame acting for the host of the job it names (tool_deferred,
// tool_progress, tool_partial_result, tool_result, tool_interaction_update) when it comes from
// another slot than the one the call was dispatched to: forbidden, naming the job, and nothing
// changes. It is nil when sl may act — or when the session has no such job, which the engine
// then answers (unknown_call).
func (s *Session) notOwner(sl *Slot, callID, handle string) *frames.Error {
	j, err := s.engine().Lookup(s.ctx(), s.jobAddr(callID, handle))
	if err != nil || j.Slot == "" || j.Slot == sl.id {
		return nil
	}
	e := frames.Errorf(frames.CodeForbidden, "the job %s was dispatched to another connection of this session: only that one may act for it",
		describeRef(callID, handle))
	e.CallID, e.Handle = j.CallID, j.Handle
	return e
}

// callerMayCancel reports whether a job.cancel from sl may reach the job it names: always, but
// for a slot attached with the caller token, whose cancel reaches only the jobs of its own slot
// and the voice model's calls — those the caller may cancel by voice (cancel_job). A job the
// session does not have is left to the engine (unknown_call).
func (s *Session) callerMayCancel(sl *Slot, f *frames.JobCancel) bool {
	if !sl.byCaller {
		return true
	}
	j, err := s.engine().Lookup(s.ctx(), s.jobAddr(f.CallID, f.Handle))
	if err != nil {
		return true
	}
	return j.Slot == sl.id || (s.voice != nil && s.voice.HasCall(j.CallID))
}

// unreachableCancel answers a job.cancel that may not reach its job exactly as one naming no
// job of the session.
func (s *Session) unreachableCancel(sl *Slot, f *frames.JobCancel) {
	s.send(sl, &frames.JobCancelResult{Reply: frames.Reply{Ref: f.ID}, CallID: f.CallID, Handle: f.Handle,
		Result: frames.CancelResultUnknownCall})
}

// ownerOf is the call id and handle a host frame names, for notOwner.
func ownerOf(f frames.Frame) (callID, handle string, ok bool) {
	switch f := f.(type) {
	case *frames.ToolDeferred:
		return f.CallID, "", true
	case *frames.ToolProgress:
		return f.CallID, f.Handle, true
	case *frames.ToolPartialResult:
		return f.CallID, f.Handle, true
	case *frames.ToolResult:
		return f.CallID, f.Handle, true
	case *frames.ToolInteractionUpdate:
		return f.CallID, f.Handle, true
	}
	return "", "", false
}
