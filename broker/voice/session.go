package voice

import (
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// The voice side across a session's life: its end, its parking for another node, and the
// adoption of an earlier node's jobs (SPEC 8, 15).

// Completion is a completion still to be voiced when a session moves to another node: parked
// with the session, or found in the store by the node that took it over. Its JSON is part of
// the parked session's state.
type Completion struct {
	CallID  string        `json:"call_id"`
	Handle  string        `json:"handle,omitempty"`
	Slot    string        `json:"slot,omitempty"`
	Attempt int           `json:"attempt"`
	Spoken  int           `json:"spoken,omitempty"`
	Request model.Request `json:"request"`
}

// End runs when the session ends (SPEC 8): a completion still queued (or being spoken) gets
// tool_job_delivery_failed session_ended, an unspoken inject gets inject_rejected (retryable
// false) — both before session.ended. Then everything stops.
func (v *Voice) End() {
	var pending []*narration.Item
	for _, r := range v.playing {
		if r.item != nil {
			pending = append(pending, r.item)
		}
	}
	v.playing = nil
	pending = append(pending, v.queue.Remove(func(*narration.Item) bool { return true })...)
	for _, it := range pending {
		switch it.Kind {
		case narration.Completion:
			v.deliveryFailed(it, narration.SessionEnded, it.Spoken)
		case narration.Inject:
			d := it.Payload.(*itemData)
			e := frames.Errorf(frames.CodeInjectRejected, "the session ended before the inject was spoken")
			e.Ref = d.inject
			v.env.SendToSlot(d.slot, e)
			v.env.Record("", "", jobs.KindInjectRejected, map[string]any{"text": d.req.Text, "retryable": false})
		}
	}
	v.Stop()
}

// Stop stops everything the voice side runs — playout, timers, the model — and sends nothing
// (a node shutting down with a shared store: SPEC 18).
func (v *Voice) Stop() {
	if v.done {
		return
	}
	v.done = true
	v.stopTicker()
	v.playing = nil
	if v.wake != nil {
		v.wake()
	}
	if v.soon != nil {
		v.soon()
	}
	for _, a := range v.asks {
		if a.reask != nil {
			a.reask()
		}
	}
	_ = v.m.Close()
}

// Park lists the completions still to be voiced, for the node the session moves to. One being
// spoken is a failed attempt (its host hears so now): it goes on as the next attempt, or, after
// the last, ends in tool_job_delivery_failed (SPEC 8). They leave the queue.
func (v *Voice) Park() []Completion {
	var out []Completion
	add := func(it *narration.Item, spoken bool) {
		if it.Kind != narration.Completion {
			return
		}
		d := it.Payload.(*itemData)
		attempt := it.Attempt
		if spoken {
			v.lifecycle(it, "failed", "")
			if attempt >= narration.MaxCompletionAttempts {
				v.deliveryFailed(it, narration.ModelError, attempt)
				return
			}
			attempt++
		}
		out = append(out, Completion{CallID: it.CallID, Handle: d.handle, Slot: d.slot, Attempt: attempt,
			Spoken: it.Spoken, Request: d.req})
	}
	for _, r := range v.playing {
		if r.item != nil {
			add(r.item, true)
		}
	}
	for _, it := range v.queue.Remove(func(*narration.Item) bool { return true }) {
		add(it, false)
	}
	return out
}

// Adopt gives a taken-back session's voice side the open jobs the model of the earlier node
// started, and the completions it had not voiced yet. The new model never made those calls, so
// none gets a function output: a job that ends is voiced as a completion, and one awaiting
// permission is asked again.
func (v *Voice) Adopt(open []*jobs.Job, completions []Completion) {
	for _, j := range open {
		if j.ConversationID != "" || j.Local || j.AgentCallID == "" || v.calls[j.CallID] != nil {
			continue
		}
		vc := &call{modelID: j.AgentCallID, brokerID: j.CallID, slot: j.Slot, name: j.Tool.Name, args: j.Arguments,
			label: AdoptedLabel(j), deferred: j.State == jobs.Deferred, answered: true, state: j.State, handle: j.Handle,
			notify: AdoptedNotify(j)}
		v.calls[j.CallID] = vc
		v.byModel[j.AgentCallID] = vc
		if j.State == jobs.AwaitingPermission {
			v.askPermission(vc)
		}
	}
	for _, c := range completions {
		v.queueItem(&narration.Item{Kind: narration.Completion, CallID: c.CallID, Attempt: c.Attempt, Spoken: c.Spoken,
			Payload: &itemData{req: c.Request, handle: c.Handle, slot: c.Slot}})
	}
	v.openJobsContext()
}

// AdoptedLabel is how an adopted voice job is named: its status_label, or its tool's name.
func AdoptedLabel(j *jobs.Job) string {
	if j.StatusLabel != "" {
		return j.StatusLabel
	}
	return j.Tool.Name
}

// AdoptedNotify: an adopted voice job's end is voiced if its tool says so, or if the model was
// still waiting for its output (it was not deferred) — the new model never gets that output.
func AdoptedNotify(j *jobs.Job) bool { return j.Tool.NotifyOnComplete || j.DeferredMS == 0 }
