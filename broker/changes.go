package broker

import (
	"encoding/json"
	"time"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// handleChange runs what a job transition causes in its session: the host's tool_cancel when
// the job is cancelled or times out (exactly once, with the transition), and the agent's side
// of the job (placeholder, result, prompts).
func (s *Session) handleChange(c jobs.Change) {
	s.node.metrics.changed(c.Event)
	if s.ended {
		return
	}
	j := c.Job
	ends := c.Event.Terminal() && !c.From.Terminal()
	if ends {
		if s.finished[j.CallID] {
			return // handled already: reconcile found it before its change arrived
		}
		if s.finished == nil {
			s.finished = make(map[string]bool)
		}
		s.finished[j.CallID] = true
	}
	if ends && (j.State == jobs.Cancelled || j.State == jobs.TimedOut) && jobs.IsOpen(c.From) {
		// The transition's own frame first: the host hears of the cancel or timeout before any
		// narration it causes (the completion's tool_job_narration queued).
		s.toolCancel(j)
	}
	if s.voice != nil && s.voice.HasCall(j.CallID) {
		s.voice.JobChanged(c)
	}
	var text *textagent.Agent
	if s.text != nil && j.ConversationID != "" {
		text = s.text.a
		s.agentDirty = true
	}
	if s.port != nil && j.TaskTTLMS > 0 {
		defer s.port.taskChanged() // after the text agent's side: an MCP task's state (SPEC 14)
	}
	switch c.Event {
	case jobs.EventDeferred:
		if text != nil {
			text.Deferred(j.CallID)
		}
	case jobs.EventProgress:
		if s.port != nil && text != nil {
			for _, e := range c.Entries {
				if note, ok := e.Detail["note"].(string); ok {
					s.port.progress(j.CallID, note)
				}
			}
		}
	case jobs.EventPartial:
		if s.port != nil && text != nil {
			for _, e := range c.Entries {
				if reply, _ := e.Detail["reply"].(bool); reply && e.Kind == jobs.KindPartial {
					if seg, err := json.Marshal(e.Detail["segment"]); err == nil {
						s.port.progress(j.CallID, "milestone: "+textagent.OutputBody(seg))
					}
				}
			}
		}
		if text != nil {
			if c.Superseded != "" {
				text.InteractionClosed(c.Superseded)
			}
			if c.Interaction != nil {
				text.InteractionOpened(j.CallID, c.Interaction)
			}
		}
	case jobs.EventInteractionClosed:
		if text != nil && c.Interaction != nil {
			text.InteractionClosed(c.Interaction.ID)
		}
	case jobs.EventCompleted, jobs.EventFailed, jobs.EventCancelled, jobs.EventTimedOut, jobs.EventDeclined:
		if !ends {
			return
		}
		s.openJobs--
		delete(s.callSeq, j.CallID)
		if text != nil {
			agentCallEnded(text, j)
		}
	}
}

// agentCallEnded tells the text agent that the job of one of its calls ended.
func agentCallEnded(text *textagent.Agent, j *jobs.Job) {
	if j.Interaction == nil && len(j.Closed) > 0 {
		for id, how := range j.Closed {
			if how == jobs.InteractionEnded {
				text.InteractionClosed(id)
			}
		}
	}
	if j.Local && j.State == jobs.Cancelled {
		text.LocalCancelled(j.CallID)
	}
	text.Finished(j.CallID, textagent.Outcome{State: j.State, Output: j.Output, Error: j.Error,
		Duration: time.Duration(j.FinishedMS-j.CreatedMS) * time.Millisecond, CancelReason: frames.CancelReason(j.CancelReason)})
}

// toolCancel tells a job's host to stop (SPEC 11). A tool_call still waiting undelivered in
// the outbox of an absent host is replaced there, in place and under the same seq, by its
// tool_cancel, so it is never delivered (SPEC 10).
func (s *Session) toolCancel(j *jobs.Job) {
	if j.Local || j.DispatchedMS == 0 || s.cancelSent[j.CallID] {
		return // nothing was sent to a host, or its tool_cancel was already
	}
	sl := s.slots[j.Slot]
	if sl == nil {
		return // its slot expired: nobody to tell
	}
	f := &frames.ToolCancel{CallID: j.CallID, Handle: j.Handle, Reason: frames.CancelReason(j.CancelReason)}
	if co, ok := s.callSeq[j.CallID]; ok && co.slot == sl.id && co.seq > sl.sent {
		data, err := frames.Encode(f)
		if err == nil {
			data = withSeq(data, f.FrameType(), co.seq)
			if sl.out.replace(co.seq, data) {
				s.holdReplacement(sl, co.seq, data)
				return
			}
		}
	}
	s.send(sl, f)
}
