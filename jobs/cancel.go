package jobs

import (
	"context"
	"errors"

	"github.com/backchannel-io/backchannel/frames"
)

// Cancel applies a cancel request (SPEC 5, 11): an open job becomes cancelled with reason (the
// host is to be sent tool_cancel, see Change) and its children are closed after it with
// parent_cancelled. A cancel that loses the race — the job is finished, or was cancelled
// already — changes nothing and is recorded as duplicate_cancel. The result is the
// job.cancel_result value, with the job it addressed (nil for unknown_call).
func (e *Engine) Cancel(ctx context.Context, a Addr, reason frames.CancelReason) (frames.CancelResult, *Job, error) {
	j, err := e.resolve(ctx, a)
	if errors.Is(err, ErrUnknownCall) {
		return frames.CancelResultUnknownCall, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	res, decided, err := e.cancel(ctx, j, reason)
	return res, decided, err
}

// cancel moves j to cancelled for reason, or records the duplicate. It returns the job as the
// answer was decided on: j, or the store's newer version once a lost race made it look again
// (a duplicate's state and cancel reason are then the store's, not those of a stale j).
func (e *Engine) cancel(ctx context.Context, j *Job, reason frames.CancelReason) (frames.CancelResult, *Job, error) {
	var result frames.CancelResult
	decided := j
	err := e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		decided = j
		if j.State.Terminal() {
			result = frames.CancelResultAlreadyDone
			if j.State == Cancelled {
				result = frames.CancelResultAlreadyCanceled
			}
			t := e.note(j.Tenant, j.SessionID, j.CallID, now, entry(now, KindDuplicateCancel, j,
				map[string]any{"reason": string(reason), "state": string(j.State)}))
			return &plan{t: t, change: Change{Event: EventDuplicateCancel, Job: j}}, nil
		}
		result = frames.CancelResultCancelled
		return e.cancelPlan(j, now, reason), nil
	})
	return result, decided, err
}

// cancelPlan is the transition of an open job into cancelled for reason.
func (e *Engine) cancelPlan(j *Job, now int64, reason frames.CancelReason) *plan {
	next := j.edit()
	next.State, next.CancelReason = Cancelled, string(reason)
	t := e.write(j, next, now, entry(now, KindCancel, next, map[string]any{"reason": string(reason)}))
	return &plan{t: t, change: Change{Event: EventCancelled}}
}

// cascade closes every open descendant of an ended parent call with parent_cancelled (SPEC
// 11), each exactly once and each after its parent: open children are cancelled (and cascade
// themselves), and the cascade goes through children that completed, failed or were declined
// (a sub-agent call that completed keeps its calls, but they are still descendants of the
// cancelled call). It then clears the parent's cascade marker — in the transition that closes
// the last child when that child was still open, else on its own. ids are the parent's
// children as the store reported them with the parent's own transition; nil asks the store
// (a cascade marker that the scheduler claimed).
func (e *Engine) cascade(ctx context.Context, tenant, parentCallID string, ids []string) error {
	if ids == nil {
		var err error
		if ids, err = e.children(ctx, tenant, parentCallID); err != nil {
			return err
		}
	}
	seen := map[string]bool{parentCallID: true}
	cleared, err := e.closeDescendants(ctx, tenant, ids, seen, parentCallID)
	if err != nil || cleared {
		return err
	}
	return e.retry(ctx, func() error { return e.store.DoneCascade(ctx, tenant, parentCallID) })
}

// children returns the call ids of a job's children, open or ended.
func (e *Engine) children(ctx context.Context, tenant, callID string) ([]string, error) {
	return read(ctx, e, func() ([]string, error) { return e.store.Children(ctx, tenant, callID) })
}

// closeDescendants cancels the open jobs among ids and walks through the ended ones. With
// marker set, the transition that closes the last of ids, when it is open, also removes the
// cascade marker of that call; it reports whether that happened.
func (e *Engine) closeDescendants(ctx context.Context, tenant string, ids []string, seen map[string]bool, marker string) (bool, error) {
	cleared := false
	for i, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		child, err := e.load(ctx, tenant, id, false)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		last := ""
		if i == len(ids)-1 {
			last = marker
		}
		ended, _, err := e.closeChild(ctx, child, last)
		if err != nil {
			return false, err
		}
		switch ended {
		case "":
			cleared = last != "" // cancelled now; its own cancellation cascades to its descendants
			continue
		case Cancelled, TimedOut:
			continue // its own cascade closes its descendants
		}
		grand, err := e.children(ctx, tenant, id)
		if err != nil {
			return false, err
		}
		if _, err := e.closeDescendants(ctx, tenant, grand, seen, ""); err != nil {
			return false, err
		}
	}
	return cleared, nil
}

// closeChild cancels a descendant of a cancelled or timed-out call with parent_cancelled, its
// transition also clearing the cascade marker of clearCascade when that is set. A descendant
// that has already ended is left as it is (no duplicate_cancel: the cascade is no request of
// its own) and its state is returned; "" and the cancelled record when it was cancelled now.
func (e *Engine) closeChild(ctx context.Context, j *Job, clearCascade string) (State, *Job, error) {
	var ended State
	var closed *Job
	err := e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		ended, closed = "", nil
		if j.State.Terminal() {
			ended = j.State
			return nil, nil
		}
		p := e.cancelPlan(j, now, frames.CancelParentCancelled)
		p.t.ClearCascade = clearCascade
		closed = p.t.Job
		return p, nil
	})
	return ended, closed, err
}
