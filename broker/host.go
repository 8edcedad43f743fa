package broker

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// declare applies a tools.declare (or the tools of a hello): the slot's tool set is replaced
// as a whole, or nothing changes (SPEC 4). The declaration was prepared — checked, counted and
// compiled — before its event reached the loop (precompile.go); the tool count is checked again
// here, against what the session's other slots declare now.
func (s *Session) declare(sl *Slot, ref string, decls []frames.ToolDecl) {
	limit := s.node.cfg.Limits.MaxTools
	p := s.preparedFor(decls)
	if p == nil {
		// Every caller's frame comes prepared; this is only a safety net.
		p = prepareTools(decls, s.toolNamesExcept(sl.id), limit)
	}
	if p.err != nil {
		s.sendError(sl, ref, p.err)
		return
	}
	distinct := s.toolNamesExcept(sl.id)
	if sl.byCaller {
		// SPEC 11: a connection attached with the caller token may declare only names no other
		// slot declares — it may not take a backend tool's calls over.
		for _, n := range p.names {
			if distinct[n] {
				s.sendError(sl, ref, frames.Errorf(frames.CodeForbidden,
					"tool %q is declared by another connection of this session: a connection attached with the caller token may declare only names no other declares", n))
				return
			}
		}
	}
	for n := range p.tools {
		distinct[n] = true
	}
	if len(distinct) > limit {
		s.sendError(sl, ref, tooManyTools(len(distinct), limit))
		return
	}
	p.publish()
	tools, names := p.tools, p.names
	sl.tools = tools
	sl.declared = true
	s.saveJournal()
	s.send(sl, &frames.ToolsDeclared{Reply: frames.Reply{Ref: ref}, Names: names})
	if s.voice != nil {
		s.voice.DeclareTools(s.voiceTools())
	}
	if s.port != nil {
		s.port.toolsChanged()
	}
}

// route finds the slot a new call of tool name goes to: the latest slot that still declares it,
// attached or resumable (SPEC 1, 4).
func (s *Session) route(name string) (*Slot, *Tool) {
	var best *Slot
	for _, sl := range s.slots {
		if sl.expired || sl.tools[name] == nil {
			continue
		}
		if best == nil || sl.order > best.order {
			best = sl
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, best.tools[name]
}

// dispatch sends a pending job's tool_call to its slot and remembers where it went.
func (s *Session) dispatch(sl *Slot, t *Tool, j *jobs.Job) { s.dispatchOut(sl, t, j, nil) }

// dispatchOut is dispatch of a tool_call the job's transition may have journaled (fo, from
// callFrameOut).
func (s *Session) dispatchOut(sl *Slot, t *Tool, j *jobs.Job, fo *jobs.FrameOut) {
	seq := s.sendOut(sl, fo, s.toolCall(t, j))
	s.callSeq[j.CallID] = callOut{slot: sl.id, seq: seq}
}

// toolCall is a job's tool_call frame.
func (s *Session) toolCall(t *Tool, j *jobs.Job) *frames.ToolCall {
	args := j.Arguments
	if len(args) == 0 {
		args = []byte("{}")
	}
	return &frames.ToolCall{CallID: j.CallID, Name: t.Decl.Name, Arguments: args,
		Deferred: t.Job.Deferred, TimeoutMS: t.timeoutMS(), SessionID: s.id}
}

// callFrameOut prepares a new job's tool_call to be journaled with the call's transition.
func (s *Session) callFrameOut(sl *Slot, t *Tool) *jobs.FrameOut {
	return s.frameOut(sl, func(seq int64, o any) []byte { return encodeWithSeq(s.toolCall(t, o.(*jobs.Job)), seq) })
}

// jobAddr turns the call_id/handle pair of a host frame into an address.
func (s *Session) jobAddr(callID, handle string) jobs.Addr {
	return jobs.Addr{Tenant: s.tenant, SessionID: s.id, CallID: callID, Handle: handle}
}

// jobError maps an engine error about the job a host frame named (by call_id or handle) to the
// error frame of SPEC 2.1. It carries both call_id and handle whenever the session knows the
// call: a job named by its handle that has finished or is not running is looked up for its
// call_id (an error path only).
func (s *Session) jobError(err error, callID, handle string) *frames.Error {
	var e *frames.Error
	known := false
	switch {
	case errors.Is(err, jobs.ErrUnknownCall):
		e = frames.Errorf(frames.CodeUnknownCall, "no job of this session is %s", describeRef(callID, handle))
	case errors.Is(err, jobs.ErrCallFinished):
		e = frames.Errorf(frames.CodeCallFinished, "the job %s has finished", describeRef(callID, handle))
		known = true
	case errors.Is(err, jobs.ErrCallNotPending):
		e = frames.Errorf(frames.CodeCallNotPending, "the job %s is not running", describeRef(callID, handle))
		known = true
	default:
		e = frames.Errorf(frames.CodeInternal, "the job store failed; try again")
		e.Retryable = true
	}
	e.CallID, e.Handle = callID, handle
	if known && (callID == "" || handle == "") {
		if j, err := s.engine().Lookup(s.ctx(), s.jobAddr(callID, handle)); err == nil {
			e.CallID, e.Handle = j.CallID, j.Handle
		}
	}
	return e
}

func describeRef(callID, handle string) string {
	if handle != "" {
		return fmt.Sprintf("with handle %q", handle)
	}
	return fmt.Sprintf("with call_id %q", callID)
}

// deferCall answers tool_deferred with tool_deferred_ack (SPEC 6).
func (s *Session) deferCall(sl *Slot, f *frames.ToolDeferred) {
	fo := s.frameOut(sl, func(seq int64, o any) []byte {
		ack := o.(frames.ToolDeferredAck)
		ack.Ref = f.ID
		return encodeWithSeq(&ack, seq)
	})
	ack, err := s.engine().DeferWithFrame(s.ctx(), s.jobAddr(f.CallID, ""), f.Handle, f.StatusLabel, fo)
	if err != nil {
		s.sendError(sl, f.ID, s.jobError(err, f.CallID, ""))
		return
	}
	ack.Ref = f.ID
	s.sendOut(sl, fo, &ack)
}

// encodeWithSeq encodes f with its seq (nil when it cannot be encoded).
func encodeWithSeq(f frames.Frame, seq int64) []byte {
	data, err := frames.Encode(f)
	if err != nil {
		return nil
	}
	return withSeq(data, f.FrameType(), seq)
}

// progress applies tool_progress: answered with nothing on success (SPEC 7).
func (s *Session) progress(sl *Slot, f *frames.ToolProgress) {
	if err := s.engine().Progress(s.ctx(), s.jobAddr(f.CallID, f.Handle), f.Note); err != nil {
		s.sendError(sl, f.ID, s.jobError(err, f.CallID, f.Handle))
	}
}

// partial applies tool_partial_result: answered with nothing on success (SPEC 7, 9).
func (s *Session) partial(sl *Slot, f *frames.ToolPartialResult) {
	p := jobs.Partial{Segment: f.Segment, Reply: f.Reply, Phase: f.Phase}
	if ia := f.Interaction; ia != nil {
		p.Interaction = &jobs.Interaction{ID: ia.ID, Prompt: ia.Prompt, Options: ia.Options}
	}
	if _, err := s.engine().PartialResult(s.ctx(), s.jobAddr(f.CallID, f.Handle), p); err != nil {
		s.sendError(sl, f.ID, s.jobError(err, f.CallID, f.Handle))
	}
}

// result applies tool_result (SPEC 5); a late one is answered with call_finished.
func (s *Session) result(sl *Slot, f *frames.ToolResult) {
	lim := s.node.cfg.Limits.MaxPayloadBytes
	if len(f.Output) > lim {
		s.sendError(sl, f.ID, frames.Errorf(frames.CodeLimitExceeded, "output of %d bytes is over the limit of %d bytes", len(f.Output), lim))
		return
	}
	isError := f.Error != ""
	if _, err := s.engine().Result(s.ctx(), s.jobAddr(f.CallID, f.Handle), f.Output, f.Error, isError); err != nil {
		s.sendError(sl, f.ID, s.jobError(err, f.CallID, f.Handle))
	}
}

// jobCancel answers job.cancel with job.cancel_result; the reason follows the sender's role
// (SPEC 11).
func (s *Session) jobCancel(sl *Slot, f *frames.JobCancel) {
	reason := frames.CancelHostRequest
	switch sl.role {
	case frames.RoleCaller:
		reason = frames.CancelCallerRequest
	case frames.RoleAgent:
		reason = frames.CancelAgentRequest
	}
	res, j, err := s.engine().Cancel(s.ctx(), s.jobAddr(f.CallID, f.Handle), reason)
	if err != nil {
		s.sendError(sl, f.ID, s.jobError(err, f.CallID, f.Handle))
		return
	}
	if res == frames.CancelResultAlreadyCanceled && j != nil && s.cancelLostInCrash(sl, j, reason) {
		res = frames.CancelResultCancelled // that cancel, sent again: the answer it never got
	}
	out := &frames.JobCancelResult{Reply: frames.Reply{Ref: f.ID}, Result: res}
	if j != nil {
		out.CallID, out.Handle = j.CallID, j.Handle
	}
	s.send(sl, out)
}

// cancelLostInCrash reports whether job j, cancelled for reason, was cancelled by a job.cancel
// of slot sl that a node applied and died before its answer was journaled (SPEC 15): the
// session was taken over from a dead node after the cancel, and the slot's outbox has no answer
// to it. A job.cancel for j sent again is that cancel, and gets the answer the first would have.
func (s *Session) cancelLostInCrash(sl *Slot, j *jobs.Job, reason frames.CancelReason) bool {
	if s.takenOverMS == 0 || j.CancelReason != string(reason) || j.FinishedMS >= s.takenOverMS {
		return false
	}
	id := []byte(`"call_id":"` + j.CallID + `"`)
	for _, f := range sl.out.frames {
		if bytes.Contains(f.data, []byte(`"type":"job.cancel_result"`)) && bytes.Contains(f.data, id) {
			return false // answered, and journaled: whoever resumed has it
		}
	}
	return true
}

// interactionUpdate answers tool_interaction_update with its deterministic ack (SPEC 9).
func (s *Session) interactionUpdate(sl *Slot, f *frames.ToolInteractionUpdate) {
	a := s.jobAddr(f.CallID, f.Handle)
	res, err := s.engine().UpdateInteraction(s.ctx(), a, f.InteractionID, f.State)
	if err != nil {
		s.sendError(sl, f.ID, s.jobError(err, f.CallID, f.Handle))
		return
	}
	ack := &frames.ToolInteractionUpdateAck{Reply: frames.Reply{Ref: f.ID}, InteractionID: f.InteractionID, State: f.State, Result: res}
	if j, err := s.engine().Lookup(s.ctx(), a); err == nil {
		ack.CallID, ack.Handle = j.CallID, j.Handle
	}
	s.send(sl, ack)
}

// inject asks the agent to take a turn (SPEC 8).
func (s *Session) inject(sl *Slot, f *frames.Inject) { s.injectVoice(sl, f) }

// callerText is a caller turn given as text (SPEC 17): echoed as the caller's transcript, then
// treated exactly like a final transcript of speech.
func (s *Session) callerText(sl *Slot, f *frames.CallerText, at time.Time) {
	s.send(sl, &frames.Transcript{Role: frames.RoleCaller, Text: f.Text, Final: true})
	if s.voice != nil && sl == s.caller {
		s.voice.CallerText(f.Text, at)
	}
}
