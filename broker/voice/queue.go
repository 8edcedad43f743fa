package voice

import (
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// queueItem queues a narration item (reporting queued) and tries to speak.
func (v *Voice) queueItem(it *narration.Item) {
	it.Queued = v.env.Now()
	if old := v.queue.Push(it); old != nil {
		v.lifecycle(old, "skipped", "")
	}
	v.lifecycle(it, "queued", "")
	v.pumpSoon()
}

// coalesce is how long a newly queued item waits before it is spoken on a free floor, so that
// events that arrived together — a caller's turn on one connection, a host's result on another
// — are all seen before the highest-priority item is chosen (DESIGN: floor free → request ≤ 10 ms).
const coalesce = 10 * time.Millisecond

// pumpSoon runs pump after the coalescing window.
func (v *Voice) pumpSoon() {
	if v.soon != nil || v.done {
		return
	}
	v.soon = v.env.After(coalesce, func() {
		v.soon = nil
		v.pump()
	})
}

// pump starts the next queued item when the floor is free (SPEC 8).
func (v *Voice) pump() {
	if v.done {
		return
	}
	v.expire()
	now := v.env.Now()
	for v.queue.Len() > 0 && v.floor.Free(now) {
		it := v.queue.Pop()
		d := it.Payload.(*itemData)
		id, err := v.m.Respond(d.req)
		if err != nil {
			v.attemptEnded(it, narration.ModelFailed, false, "")
			continue
		}
		it.Spoken++
		v.observeStart(it, now)
		r := v.responseFor(id)
		if r == nil { // the model named a response that already ended
			v.attemptEnded(it, narration.ModelFailed, false, "")
			continue
		}
		r.item = it
		v.floor.InFlight = true
		if a := v.askOf(it); a != nil {
			v.asked++
			a.askedSeq = v.asked
			v.updateAutoRespond()
		}
		if p := v.perm; p != nil && p.callID == it.CallID && (d.req.Kind == model.PermissionAsk || d.req.Kind == model.Clarification) {
			p.asking(id)
		}
		v.lifecycle(it, "speaking", id)
		v.settle()
		return
	}
	v.settle()
}

// observeStart reports how long after the floor was free (with it queued) its response was
// requested.
func (v *Voice) observeStart(it *narration.Item, now time.Time) {
	ready := it.Queued
	for _, t := range []time.Time{v.floor.FreeAt(), v.freedAt} {
		if t.After(ready) {
			ready = t
		}
	}
	if d := now.Sub(ready); d >= 0 && !ready.After(now) {
		v.env.NarrationStarted(d)
	}
}

// settle arms the wake-up for the next moment the floor may free or an item may expire.
func (v *Voice) settle() {
	if v.wake != nil {
		v.wake()
		v.wake = nil
	}
	if v.queue.Len() == 0 || v.done {
		return
	}
	now := v.env.Now()
	next := v.queue.Oldest().Add(v.opts.MaxWait)
	if at := v.floor.FreeAt(); at.After(now) && at.Before(next) {
		next = at
	}
	v.wake = v.env.After(max(next.Sub(now), time.Millisecond), v.pump)
}

// expire ends the attempts of items that waited longer than the maximum (SPEC 8: floor_timeout).
func (v *Voice) expire() {
	deadline := v.env.Now().Add(-v.opts.MaxWait)
	for _, it := range v.queue.Remove(func(it *narration.Item) bool { return it.Queued.Before(deadline) }) {
		v.attemptEnded(it, narration.NoFloor, false, "")
	}
}

// lifecycle reports a narration state to the job's host (SPEC 8), for kinds that have one.
func (v *Voice) lifecycle(it *narration.Item, state, responseID string) {
	if !it.Kind.Lifecycle() {
		return
	}
	d := it.Payload.(*itemData)
	if vc := v.calls[it.CallID]; vc != nil && d.handle == "" {
		d.handle = vc.handle // deferred since it was queued: every frame from now on has it
	}
	f := &frames.ToolJobNarration{CallID: it.CallID, Handle: d.handle, Kind: narrationKind(it.Kind),
		State: frames.NarrationState(state), Attempt: it.Attempt, ResponseID: responseID}
	if it.Kind == narration.InteractionAsk {
		f.InteractionID = it.Key
	}
	v.env.SendToSlot(d.slot, f)
	switch state {
	case "delivered", "failed", "interrupted", "skipped", "stopped":
		detail := map[string]any{"kind": string(f.Kind), "state": state, "attempt": it.Attempt, "response_id": responseID}
		if f.InteractionID != "" {
			detail["interaction_id"] = f.InteractionID
		}
		v.env.Record(it.CallID, d.handle, jobs.KindNarration, detail)
	}
}

func narrationKind(k narration.Kind) frames.NarrationKind {
	switch k {
	case narration.InteractionAsk:
		return frames.NarrationInteraction
	case narration.Completion:
		return frames.NarrationCompletion
	}
	return frames.NarrationMilestone
}

// attemptEnded reports an attempt's end and retries or gives up by the failure contract.
func (v *Voice) attemptEnded(it *narration.Item, e narration.Ending, audible bool, responseID string) {
	o := narration.Decide(it, e, audible)
	v.lifecycle(it, o.State, responseID)
	switch it.Kind {
	case narration.Completion:
		switch {
		case o.Retry:
			v.retry(it)
		case o.Failed:
			// After the last failed attempt: attempts is the attempt's number, whether or
			// not they spoke.
			v.deliveryFailed(it, o.Reason, it.Attempt)
		}
	case narration.PermissionAsk:
		if p := v.perm; p != nil && p.callID == it.CallID && p.phase == permQueued && responseID == "" {
			p.notAsked(it, e)
		}
	case narration.InteractionAsk:
		a := v.askOf(it)
		if a == nil {
			return
		}
		a.item = nil
		if o.Counted {
			a.delivered = v.env.Now()
			v.armReask(a)
		} else if o.Retry {
			v.queueAsk(a)
		}
	}
}

// retry queues the next attempt of an item.
func (v *Voice) retry(it *narration.Item) {
	next := *it
	next.Attempt++
	v.queueItem(&next)
}

// deliveryFailed is the terminal frame of a completion that could not be voiced (SPEC 8):
// attempts is narration.MaxCompletionAttempts after the last failed attempt, and at session end
// the number of attempts that reached speaking.
func (v *Voice) deliveryFailed(it *narration.Item, reason narration.Reason, attempts int) {
	d := it.Payload.(*itemData)
	v.env.SendToSlot(d.slot, &frames.ToolJobDeliveryFailed{CallID: it.CallID, Handle: d.handle,
		Attempts: attempts, Reason: frames.DeliveryFailureReason(reason)})
	v.env.Record(it.CallID, d.handle, jobs.KindDeliveryFailed, map[string]any{"attempts": attempts, "reason": string(reason)})
}
