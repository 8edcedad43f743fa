package voice

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// toolCall runs a tool call of the voice model: cancel_job (SPEC 11), or a host tool (SPEC 4).
func (v *Voice) toolCall(callID, name string, args json.RawMessage) {
	if name == model.CancelJobTool.Name {
		var a struct {
			Ref string `json:"ref"`
		}
		_ = json.Unmarshal(args, &a)
		v.m.ToolResult(callID, string(v.env.CancelJob(a.Ref)), false, false)
		return
	}
	c, errText := v.env.StartCall(callID, name, args)
	if errText != "" {
		v.m.ToolResult(callID, errText, true, true)
		return
	}
	vc := &call{modelID: callID, brokerID: c.CallID, slot: c.Slot, name: name, args: args, label: name, state: c.State,
		notify: c.Notify}
	v.calls[c.CallID] = vc
	v.byModel[callID] = vc
	if c.State == jobs.AwaitingPermission {
		v.askPermission(vc)
	}
	v.openJobsContext()
}

// HasCall reports whether the voice model's calls include the job callID (open).
func (v *Voice) HasCall(callID string) bool { return v.calls[callID] != nil }

// OpenCalls lists the state the voice side believes each of its open jobs is in.
func (v *Voice) OpenCalls() map[string]jobs.State {
	out := make(map[string]jobs.State, len(v.calls))
	for id, vc := range v.calls {
		if !vc.state.Terminal() {
			out[id] = vc.state
		}
	}
	return out
}

// JobChanged runs what a transition of a voice job causes (SPEC 8, 9, 12).
func (v *Voice) JobChanged(c jobs.Change) {
	j := c.Job
	vc := v.calls[j.CallID]
	if vc == nil {
		return
	}
	vc.state, vc.handle = j.State, j.Handle
	switch c.Event {
	case jobs.EventApproved:
		v.env.Dispatch(j)
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
func (v *Voice) partial(vc *call, j *jobs.Job, c jobs.Change) {
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

// ended runs what the end of a voice job causes: its function output when the model has none
// yet (an instant result is spoken by the model), or its completion turn (SPEC 8).
func (v *Voice) ended(vc *call, j *jobs.Job) {
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
	if Voiced(j.State) {
		v.queueItem(&narration.Item{Kind: narration.Completion, CallID: j.CallID, Attempt: 1,
			Payload: &itemData{req: CompletionRequest(vc.label, vc.name, j), handle: j.Handle, slot: vc.slot}})
	}
}

// Voiced reports whether a job that ended in st gets a completion turn (SPEC 8: none for a job
// cancelled, declined or discarded).
func Voiced(st jobs.State) bool {
	return st == jobs.Completed || st == jobs.Failed || st == jobs.TimedOut
}

// CompletionRequest is the request that voices the end of job j (SPEC 8).
func CompletionRequest(label, name string, j *jobs.Job) model.Request {
	return model.Request{Kind: model.Completion, Label: label, Name: name, State: string(j.State), Output: j.Output, Error: j.Error}
}

// openJobsContext keeps the model's system item of open jobs (SPEC 8): `Open jobs:` then one
// line per job `- REF: NAME (LABEL), STATE`.
func (v *Voice) openJobsContext() {
	lines := []string{"Open jobs:"}
	var calls []*call
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

// Inject queues a host's inject from slot (SPEC 8): rejected at once while a response is in
// flight; with speak false it only adds context.
func (v *Voice) Inject(slot string, f *frames.Inject) {
	if !f.Spoken() {
		v.injects++
		v.m.SetContext(model.ContextItem{ID: "inject:" + strconv.Itoa(v.injects), Text: f.Text})
		v.env.Record("", "", jobs.KindNarration, map[string]any{"kind": "inject", "speak": false, "text": f.Text})
		return
	}
	if v.floor.InFlight {
		e := frames.Errorf(frames.CodeInjectRejected, "a response is in flight: try again when the floor is free")
		e.Retryable, e.Ref = true, f.ID
		v.env.SendToSlot(slot, e)
		v.env.Record("", "", jobs.KindInjectRejected, map[string]any{"text": f.Text, "retryable": true})
		return
	}
	v.env.Record("", "", jobs.KindNarration, map[string]any{"kind": "inject", "speak": true, "text": f.Text})
	v.queueItem(&narration.Item{Kind: narration.Inject, Attempt: 1,
		Payload: &itemData{req: model.Request{Kind: model.Inject, Text: f.Text}, inject: f.ID, slot: slot}})
}
