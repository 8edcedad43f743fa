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
	res, err := e.cancel(ctx, j, reason)
	return res, j, err
}

// cancel moves j to cancelled for reason, or records the duplicate.
func (e *Engine) cancel(ctx context.Context, j *Job, reason frames.CancelReason) (frames.CancelResult, error) {
	var result frames.CancelResult
	err := e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
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
		next := j.Clone()
		next.State, next.CancelReason = Cancelled, string(reason)
		t := e.write(j, next, now, entry(now, KindCancel, next, map[string]any{"reason": string(reason)}))
		return &plan{t: t, change: Change{Event: EventCancelled}}, nil
	})
	return result, err
}

// cascade closes every open descendant of an ended parent call with parent_cancelled (SPEC
// 11), each exactly once and each after its parent: open children are cancelled (and cascade
// themselves), and the cascade goes through children that already ended (a sub-agent call that
// completed keeps its calls, but they are still descendants of the cancelled call). It then
// clears the parent's cascade marker. With always unset (right after the parent's own
// transition) a parent found without children leaves any marker to the scheduler, which clears
// it.
func (e *Engine) cascade(ctx context.Context, tenant, parentCallID string, always bool) error {
	ids, err := e.children(ctx, tenant, parentCallID)
	if err != nil {
		return err
	}
	if len(ids) == 0 && !always {
		return nil
	}
	seen := map[string]bool{parentCallID: true}
	if err := e.closeDescendants(ctx, tenant, ids, seen); err != nil {
		return err
	}
	return e.retry(ctx, func() error { return e.store.DoneCascade(ctx, tenant, parentCallID) })
}

func (e *Engine) children(ctx context.Context, tenant, callID string) ([]string, error) {
	var ids []string
	err := e.retry(ctx, func() error {
		var err error
		ids, err = e.store.Children(ctx, tenant, callID)
		return err
	})
	return ids, err
}

// closeDescendants cancels the open jobs among ids and walks through the ended ones.
func (e *Engine) closeDescendants(ctx context.Context, tenant string, ids []string, seen map[string]bool) error {
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		child, err := e.load(ctx, tenant, id, true)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !child.State.Terminal() {
			// Its own cancellation cascades to its descendants.
			if _, err := e.cancel(ctx, child, frames.CancelParentCancelled); err != nil {
				return err
			}
			continue
		}
		grand, err := e.children(ctx, tenant, id)
		if err != nil {
			return err
		}
		if err := e.closeDescendants(ctx, tenant, grand, seen); err != nil {
			return err
		}
	}
	return nil
}
