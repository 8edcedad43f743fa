package jobs

import (
	"context"
	"time"
)

// Verdict is a verifier's judgement of a caller's reply to a permission ask (SPEC 12).
type Verdict string

// The verdicts.
const (
	Approve Verdict = "approve"
	Hold    Verdict = "hold"
	Decline Verdict = "decline"
)

// Decision is one judged permission reply, recorded on the timeline as `permission`.
type Decision struct {
	Verdict    Verdict
	Reason     string
	Transcript string
	Ask        string
}

func (d Decision) detail() map[string]any {
	return map[string]any{"verdict": string(d.Verdict), "reason": d.Reason, "transcript": d.Transcript, "ask": d.Ask}
}

// PermissionAsked starts the permission clock of a job awaiting permission: it declines the job
// permission_timeout after the ask (or a clarification) ended at endedAt (SPEC 12).
func (e *Engine) PermissionAsked(ctx context.Context, a Addr, endedAt time.Time) error {
	j, err := e.resolve(ctx, a)
	if err != nil {
		return err
	}
	return e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		if j.State != AwaitingPermission {
			return nil, ErrCallNotPending
		}
		next := j.edit()
		next.AskEndedMS = ms(endedAt)
		return &plan{t: e.write(j, next, now), change: Change{Event: EventPermissionAsked}}, nil
	})
}

// Permission applies a judged reply to a job awaiting permission (SPEC 12): approve makes it
// pending and dispatched now (its ordinary timeout starts); decline ends it as declined (the
// host never hears of it); hold only records the decision. Every decision is recorded as
// `permission`. ErrCallNotPending when the job no longer awaits permission.
func (e *Engine) Permission(ctx context.Context, a Addr, d Decision) error {
	j, err := e.resolve(ctx, a)
	if err != nil {
		return err
	}
	return e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		if j.State != AwaitingPermission {
			return nil, ErrCallNotPending
		}
		en := entry(now, KindPermission, j, d.detail())
		next := j.edit()
		switch d.Verdict {
		case Approve:
			next.State, next.DispatchedMS, next.ActivityMS = Pending, now, now
			return &plan{t: e.write(j, next, now, en), change: Change{Event: EventApproved}}, nil
		case Decline:
			next.State = Declined
			return &plan{t: e.write(j, next, now, en), change: Change{Event: EventDeclined}}, nil
		}
		return &plan{t: e.checked(j, now, en), change: Change{Event: EventPermissionHeld, Job: j}}, nil
	})
}
