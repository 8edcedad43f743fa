package broker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// toolCall runs a tool call of the voice model: cancel_job (SPEC 11), or a host tool (SPEC 4).
func (v *voice) toolCall(callID, name string, args json.RawMessage) {
	s := v.s
	if name == model.CancelJobTool.Name {
		var a struct {
			Ref string `json:"ref"`
		}
		_ = json.Unmarshal(args, &a)
		v.m.ToolResult(callID, string(v.cancelJob(a.Ref)), false, false)
		return
	}
	sl, tool := s.route(name)
	if sl == nil {
		v.m.ToolResult(callID, fmt.Sprintf("Tool %s is not available", name), true, true)
		return
	}
	if msg := tool.checkArguments(args); msg != "" {
		v.m.ToolResult(callID, msg, true, true)
		return
	}
	if s.openJobs >= s.node.cfg.Limits.MaxOpenJobs {
		v.m.ToolResult(callID, fmt.Sprintf("Too many open tool calls in this session (limit %d)", s.node.cfg.Limits.MaxOpenJobs), true, true)
		return
	}
	fo := s.callFrameOut(sl, tool)
	j, err := s.engine().Call(s.ctx(), jobs.NewCall{Tenant: s.tenant, SessionID: s.id, Slot: sl.id, Tool: tool.Job,
		Arguments: args, AgentCallID: callID, Frame: fo})
	if err != nil {
		v.m.ToolResult(callID, "the tool call could not be started; try again", true, true)
		return
	}
	s.openJobs++
	vc := &voiceCall{modelID: callID, brokerID: j.CallID, slot: sl.id, name: name, args: args, label: name, state: j.State,
		notify: tool.Job.NotifyOnComplete}
	v.calls[j.CallID] = vc
	v.byModel[callID] = vc
	if j.State == jobs.AwaitingPermission {
		v.askPermission(vc, j)
	} else {
		s.dispatchOut(sl, tool, j, fo)
	}
	v.openJobsContext()
}

// cancelJob is the built-in cancel_job {ref}: the caller asked (SPEC 11).
func (v *voice) cancelJob(ref string) frames.CancelResult {
	s := v.s
	a := s.addr(ref)
	if !jobs.IsBrokerCallID(ref) {
		a = jobs.Addr{Tenant: s.tenant, SessionID: s.id, Handle: ref}
	}
	// A handle never has the form of a broker call id (SPEC 6: handle_reserved), so the form of
	// ref says which it is.
	res, _, err := s.engine().Cancel(s.ctx(), a, frames.CancelCallerRequest)
	if err != nil {
		return frames.CancelResultUnknownCall
	}
	return res
}

// jobChanged runs what a transition of a voice job causes (SPEC 8, 9).
func (v *voice) jobChanged(c jobs.Change) {
	j := c.Job
	vc := v.calls[j.CallID]
	if vc == nil {
		return
	}
	vc.state, vc.handle = j.State, j.Handle
	switch c.Event {
	case jobs.EventApproved:
		if sl := v.s.slots[j.Slot]; sl != nil && sl.tools[vc.name] != nil {
			v.s.dispatch(sl, sl.tools[vc.name], j)
		}
	case jobs.EventDeferred:
		vc.deferred = true
		if j.StatusLabel != "" {
			vc.label = j.StatusLabel
		}
		// The agent gets the function output at once; the hand-off sentence is queued.
		vc.answered = true
		v.m.ToolResult(vc.modelID, fmt.Sprintf("The job is running in the background as %q (handle %s); its completion will be announced.", vc.label, j.Handle), false, false)
		v.queueItem(&narration.Item{Kind: narration.HandOff, CallID: j.CallID, Attempt: 1,
			Payload: &itemData{req: model.Request{Kind: model.HandOff, Label: vc.label, Name: vc.name}, handle: j.Handle, slot: vc.slot}})
	case jobs.EventProgress:
		for _, e := range c.Entries {
			if note, ok := e.Detail["note"].(string); ok {
				v.m.SetContext(model.ContextItem{ID: "progress:" + j.CallID, Text: fmt.Sprintf("Progress of %s (%s): %s", j.Ref(), vc.label, note)})
			}
		}
	case jobs.EventPartial:
		v.partial(vc, j, c)
	case jobs.EventInteractionClosed:
		if c.Interaction != nil {
			v.closeAsk(c.Interaction.ID, true)
		}
	case jobs.EventCompleted, jobs.EventFailed, jobs.EventCancelled, jobs.EventTimedOut, jobs.EventDeclined:
		if c.From.Terminal() {
			return
		}
		v.ended(vc, j)
	}
	v.openJobsContext()
}

// partial adds a partial result to the model's context, queues its milestone (reply: true) and
// opens its interaction.
func (v *voice) partial(vc *voiceCall, j *jobs.Job, c jobs.Change) {
	var segment json.RawMessage
	reply := false
	for _, e := range c.Entries {
		if e.Kind == jobs.KindPartial {
			if raw, err := json.Marshal(e.Detail["segment"]); err == nil {
				segment = raw
			}
			reply, _ = e.Detail["reply"].(bool)
		}
	}
	v.m.SetContext(model.ContextItem{ID: "partial:" + j.CallID, Text: fmt.Sprintf("Partial result of %s (%s): %s", j.Ref(), vc.label, segment)})
	if c.Superseded != "" {
		v.closeAsk(c.Superseded, true)
	}
	if reply {
		v.queueItem(&narration.Item{Kind: narration.Milestone, CallID: j.CallID, Attempt: 1,
			Payload: &itemData{req: model.Request{Kind: model.Milestone, Label: vc.label, Name: vc.name, Segment: segment}, handle: j.Handle, slot: vc.slot}})
	}
	if ia := c.Interaction; ia != nil {
		if old := v.asks[ia.ID]; old != nil {
			v.closeAsk(ia.ID, false)
		}
		a := &ask{id: ia.ID, callID: j.CallID, prompt: ia.Prompt, options: ia.Options}
		v.asks[ia.ID] = a
		v.queueAsk(a)
	}
}

// queueAsk queues the next attempt of an open ask (SPEC 9: at most 3 in all).
func (v *voice) queueAsk(a *ask) {
	if a.attempts >= narration.MaxAskAttempts || a.item != nil {
		return
	}
	a.attempts++
	d := &itemData{req: model.Request{Kind: model.InteractionAsk, Prompt: a.prompt, Options: a.options}}
	if vc := v.calls[a.callID]; vc != nil {
		d.handle, d.slot = vc.handle, vc.slot
	}
	a.item = &narration.Item{Kind: narration.InteractionAsk, CallID: a.callID, Key: a.id, Attempt: a.attempts, Payload: d}
	v.queueItem(a.item)
}

// armReask asks a delivered, unanswered ask again 30 s later (SPEC 9).
func (v *voice) armReask(a *ask) {
	if a.reask != nil {
		a.reask.Stop()
	}
	a.reask = v.s.after(v.s.node.cfg.ReaskAfter, func() {
		if v.asks[a.id] == a && a.item == nil {
			v.queueAsk(a)
		}
	})
}

// askOf returns the open ask an item voices.
func (v *voice) askOf(it *narration.Item) *ask {
	if it.Kind != narration.InteractionAsk {
		return nil
	}
	if a := v.asks[it.Key]; a != nil && a.item == it {
		return a
	}
	return nil
}

// closeAsk closes an ask: its pending narration is stopped (SPEC 9); moot tells the model not
// to act on it.
func (v *voice) closeAsk(id string, moot bool) {
	a := v.asks[id]
	if a == nil {
		return
	}
	delete(v.asks, id)
	defer v.updateAutoRespond()
	if a.reask != nil {
		a.reask.Stop()
	}
	if it := a.item; it != nil {
		if removed := v.queue.Remove(func(x *narration.Item) bool { return x == it }); len(removed) > 0 {
			v.lifecycle(it, "stopped", "")
		} else {
			for _, r := range v.playing {
				if r.item == it && !r.interrupted {
					r.item = nil // it ends here; the response is cut
					r.interrupted = true
					r.frames = nil
					v.m.Cancel(r.id)
					v.lifecycle(it, "stopped", r.id)
				}
			}
		}
	}
	if moot {
		v.m.SetContext(model.ContextItem{ID: "interaction:" + id, Text: fmt.Sprintf("The question %s (%q) is moot: do not act on it.", id, a.prompt)})
	}
	v.play()
}

// answer gives a matched caller reply to the host (SPEC 9): it closes the interaction and is no
// turn of the model.
func (v *voice) answer(a *ask, option, text string) {
	res, err := v.s.answerInteraction(a.callID, a.id, option, text)
	if err != nil || res != frames.UpdateApplied {
		v.closeAsk(a.id, false)
		v.m.CallerTurn(text, nil)
		return
	}
	v.closeAsk(a.id, false)
	v.m.SetContext(model.ContextItem{ID: "interaction:" + a.id, Text: fmt.Sprintf("Caller answered %s: %s", a.id, text)})
}

// ended runs what the end of a voice job causes: its function output when the model has none
// yet (an instant result is spoken by the model), or its completion turn (SPEC 8).
func (v *voice) ended(vc *voiceCall, j *jobs.Job) {
	delete(v.calls, j.CallID)
	delete(v.byModel, vc.modelID)
	// Nothing more is said about a job that is over, except its completion (which also makes
	// a hand-off still unspoken moot).
	for _, it := range v.queue.Remove(func(it *narration.Item) bool {
		return it.CallID == j.CallID && it.Kind != narration.Completion
	}) {
		v.lifecycle(it, "skipped", "")
	}
	for id, a := range v.asks {
		if a.callID == j.CallID {
			v.closeAsk(id, false)
		}
	}
	if v.perm != nil && v.perm.callID == j.CallID {
		v.perm.closed()
	}
	if !vc.answered {
		vc.answered = true
		switch j.State {
		case jobs.Completed:
			v.m.ToolResult(vc.modelID, textagent.OutputBody(j.Output), false, true)
		case jobs.Failed:
			v.m.ToolResult(vc.modelID, j.Error, true, true)
		case jobs.TimedOut:
			v.m.ToolResult(vc.modelID, "the tool call timed out", true, true)
		case jobs.Declined:
			v.m.ToolResult(vc.modelID, "declined by the caller", true, false)
		default:
			v.m.ToolResult(vc.modelID, "the tool call was cancelled", true, false)
		}
		return
	}
	if !vc.notify {
		return
	}
	// A completion turn, even if the conversation moved on; none for a job cancelled or
	// discarded (SPEC 8).
	req := completionRequest(vc.label, vc.name, j)
	switch j.State {
	case jobs.Completed, jobs.Failed, jobs.TimedOut:
		v.queueItem(&narration.Item{Kind: narration.Completion, CallID: j.CallID, Attempt: 1,
			Payload: &itemData{req: req, handle: j.Handle, slot: vc.slot}})
	}
}

// completionRequest is the request that voices the end of job j (SPEC 8).
func completionRequest(label, name string, j *jobs.Job) model.Request {
	return model.Request{Kind: model.Completion, Label: label, Name: name, State: string(j.State), Output: j.Output, Error: j.Error}
}

// openJobsContext keeps the model's system item of open jobs (SPEC 8): `Open jobs:` then one
// line per job `- REF: NAME (LABEL), STATE`.
func (v *voice) openJobsContext() {
	lines := []string{"Open jobs:"}
	var calls []*voiceCall
	for _, vc := range v.calls {
		calls = append(calls, vc)
	}
	sort.Slice(calls, func(i, k int) bool { return calls[i].brokerID < calls[k].brokerID })
	for _, vc := range calls {
		ref := vc.brokerID
		if vc.handle != "" {
			ref = vc.handle
		}
		lines = append(lines, fmt.Sprintf("- %s: %s (%s), %s", ref, vc.name, vc.label, vc.state))
	}
	v.m.SetContext(model.ContextItem{ID: "open_jobs", Text: strings.Join(lines, "\n")})
}

// inject queues a host's inject (SPEC 8): rejected at once while a response is in flight;
// with speak false it only adds context.
func (s *Session) injectVoice(sl *Slot, f *frames.Inject) {
	v := s.voice
	if v == nil {
		e := frames.Errorf(frames.CodeInjectRejected, "this session has no voice agent to speak the inject")
		s.sendError(sl, f.ID, e)
		return
	}
	if !f.Spoken() {
		v.m.SetContext(model.ContextItem{ID: "inject:" + randomID(8), Text: f.Text})
		s.record(jobs.KindNarration, map[string]any{"kind": "inject", "speak": false, "text": f.Text})
		return
	}
	if v.floor.InFlight {
		e := frames.Errorf(frames.CodeInjectRejected, "a response is in flight: try again when the floor is free")
		e.Retryable = true
		s.sendError(sl, f.ID, e)
		s.record(jobs.KindInjectRejected, map[string]any{"text": f.Text, "retryable": true})
		return
	}
	s.record(jobs.KindNarration, map[string]any{"kind": "inject", "speak": true, "text": f.Text})
	v.queueItem(&narration.Item{Kind: narration.Inject, Attempt: 1,
		Payload: &itemData{req: model.Request{Kind: model.Inject, Text: f.Text}, inject: f.ID, slot: sl.id}})
}
