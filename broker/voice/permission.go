package voice

import (
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
	"github.com/backchannel-io/backchannel/permissions"
)

// permission is the open spoken-permission ask of a voice session (SPEC 12): one at a time,
// first in, first out. The caller's reply goes only to the verifier, never to the model.
type permission struct {
	v      *Voice
	vc     *call
	callID string

	phase       permPhase
	kind        model.Kind // what is queued or being spoken: the ask or the clarification
	responseID  string     // the ask (or clarification) being spoken
	ask         string     // the final transcript of the ask
	endedAt     time.Time  // when the ask ended: the reply's speech must start after it
	speechStart time.Time  // when the caller's current turn started
}

type permPhase int

const (
	permQueued   permPhase = iota // the ask waits for the floor
	permAsking                    // the ask is being spoken
	permAwaiting                  // the ask ended; the next caller turn is judged
)

// askPermission queues the job's permission ask, or waits for the open one to finish.
func (v *Voice) askPermission(vc *call) {
	v.permQueue = append(v.permQueue, vc)
	if v.perm == nil {
		v.nextPermission()
	}
}

// nextPermission opens the next waiting permission ask.
func (v *Voice) nextPermission() {
	v.perm = nil
	for len(v.permQueue) > 0 {
		vc := v.permQueue[0]
		v.permQueue = v.permQueue[1:]
		if v.calls[vc.brokerID] == nil {
			continue // the job ended meanwhile
		}
		p := &permission{v: v, vc: vc, callID: vc.brokerID}
		v.perm = p
		v.updateAutoRespond()
		p.queueAsk(model.PermissionAsk)
		return
	}
	v.updateAutoRespond()
}

// queueAsk queues the ask, or the clarification after a hold, ahead of everything else. A
// clarification still queued from an earlier hold is replaced: the caller hears one.
func (p *permission) queueAsk(kind model.Kind) {
	p.phase = permQueued
	p.kind = kind
	p.unqueue()
	p.v.queueItem(&narration.Item{Kind: narration.PermissionAsk, CallID: p.callID, Attempt: 1,
		Payload: &itemData{req: model.Request{Kind: kind, Name: p.vc.name, Args: p.vc.args}}})
}

// unqueue withdraws the job's ask or clarification if it still waits for the floor.
func (p *permission) unqueue() {
	p.v.queue.Remove(func(it *narration.Item) bool {
		return it.Kind == narration.PermissionAsk && it.CallID == p.callID
	})
}

// notAsked: the ask (or clarification) ended without reaching the caller. Skipped for want of a
// free floor (SPEC 8 floor_timeout), it is queued again — the permission clock runs only from the
// end of a spoken ask, so a dropped ask would leave the call waiting for ever. Refused by the
// model, it is not retried (the model may be gone for good): the permission clock starts now, so
// that the call is declined by permission_timeout (silence is never approval).
func (p *permission) notAsked(it *narration.Item, e narration.Ending) {
	if e == narration.NoFloor {
		p.queueAsk(it.Payload.(*itemData).req.Kind)
		return
	}
	p.startClock()
}

// startClock starts the job's permission window (SPEC 12), on the job engine's clock as every
// job deadline is.
func (p *permission) startClock() {
	if err := p.v.env.PermissionAsked(p.callID); err != nil {
		p.v.opts.Log.Warn("voice: permission clock", "call_id", p.callID, "err", err)
	}
}

// asking: the ask's response was requested.
func (p *permission) asking(responseID string) {
	p.phase = permAsking
	p.responseID = responseID
}

// askEnded: the ask left the floor; permission_timeout counts from now (SPEC 12). An ask cut
// before any of it was played, with no reply judged meanwhile, reached nobody: it is asked
// again.
func (p *permission) askEnded(r *response) {
	if r.id != p.responseID {
		return
	}
	if p.phase == permAsking && r.interrupted && r.firstFrame.IsZero() {
		p.queueAsk(p.kind)
		return
	}
	p.ask = r.text
	p.endedAt = p.v.env.Now()
	p.phase = permAwaiting
	p.startClock()
}

// speechStarted notes when the caller's turn began.
func (p *permission) speechStarted(at time.Time) { p.speechStart = at }

// judges takes a final caller transcript if it is the ask's reply: the first turn whose speech
// started after the ask ended, or a turn that interrupted the ask (which can at most hold). A
// turn before the ask was ever spoken is no reply — also one that began before the first frame
// of the ask was played, though its turn on the session's event loop came later; a turn while a
// clarification waits for the floor is one (to the ask that ended before it), and goes only to
// the verifier.
func (p *permission) judges(text string) bool {
	switch p.phase {
	case permQueued:
		if p.endedAt.IsZero() {
			return false
		}
	case permAsking:
		if r := p.v.playingResponse(p.responseID); r == nil || r.firstFrame.IsZero() || !r.firstFrame.Before(p.speechStart) {
			if p.endedAt.IsZero() {
				return false // nothing of it was heard when the caller began: not its reply
			}
			// A clarification not heard yet: the turn answers the ask that ended before it.
			p.judge(text, p.speechStart.Before(p.endedAt))
			return true
		}
		p.judge(text, true)
		return true
	}
	interrupting := !p.endedAt.IsZero() && p.speechStart.Before(p.endedAt)
	p.judge(text, interrupting)
	return true
}

// judge asks the verifier and applies its verdict (SPEC 12).
func (p *permission) judge(reply string, interrupting bool) {
	v := p.v
	ask := p.ask
	if ask == "" {
		// The model gave no transcript (a muted ask): record the sentence it was asked to say.
		ask = model.Wording(model.Request{Kind: model.PermissionAsk, Name: p.vc.name, Args: p.vc.args})
	}
	j, err := v.env.Verify(permissions.Action{Tool: p.vc.name, Arguments: p.vc.args, Ask: ask}, reply)
	if err != nil {
		v.opts.Log.Warn("voice: permission verifier", "call_id", p.callID, "err", err)
	}
	if j.Verdict == jobs.Approve && interrupting {
		j = permissions.Judgement{Verdict: jobs.Hold, Reason: "interrupted_ask"}
	}
	if j.Verdict == "" {
		j.Verdict = jobs.Hold
	}
	d := jobs.Decision{Verdict: j.Verdict, Reason: j.Reason, Transcript: reply, Ask: ask}
	if err := v.env.Decide(p.callID, d); err != nil {
		v.opts.Log.Warn("voice: recording a permission decision", "call_id", p.callID, "err", err)
		v.nextPermission()
		return
	}
	if j.Verdict != jobs.Hold {
		p.unqueue() // a clarification still queued is moot once the caller answered clearly
	}
	switch j.Verdict {
	case jobs.Approve:
		v.nextPermission() // dispatched with no extra speech
	case jobs.Decline:
		// Not tied to the job (CallID ""): the job's end must not withdraw it.
		v.queueItem(&narration.Item{Kind: narration.PermissionAsk, Attempt: 1,
			Payload: &itemData{req: model.Request{Kind: model.Decline, Name: p.vc.name, Args: p.vc.args}}})
		v.nextPermission()
	default:
		p.queueAsk(model.Clarification)
	}
}

// closed: the job ended while its ask was open (timeout, cancel, session end).
func (p *permission) closed() {
	if p.v.perm == p {
		p.v.nextPermission()
	}
}
