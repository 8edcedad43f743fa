package jobs

import (
	"context"
	"errors"

	"github.com/backchannel-io/backchannel/frames"
)

// Defer answers a host's tool_deferred (SPEC 6): it checks the rows of the defer-ack table in
// order and either moves the pending job to deferred — claiming and burning the handle in the
// same atomic step and starting the deferred clock, which nothing extends — or rejects the
// defer, leaving the job pending on its ordinary timeout. A repeat of an accepted defer is
// answered the same again with no second transition. The error is non-nil only when the store
// failed.
func (e *Engine) Defer(ctx context.Context, a Addr, handle, statusLabel string) (frames.ToolDeferredAck, error) {
	return e.DeferWithFrame(ctx, a, handle, statusLabel, nil)
}

// DeferWithFrame is Defer whose accepting transition appends the ack to the host's outbox in
// the same atomic step (FrameOut; out may be nil). A rejected defer, or the repeat of an
// accepted one, applies no such transition: out.Applied stays false.
func (e *Engine) DeferWithFrame(ctx context.Context, a Addr, handle, statusLabel string, out *FrameOut) (frames.ToolDeferredAck, error) {
	ack := frames.ToolDeferredAck{CallID: a.CallID, Handle: handle}
	reject := func(reason frames.DeferAckReason, j *Job) (frames.ToolDeferredAck, error) {
		ack.Accepted, ack.Reason, ack.DeadlineMS = false, reason, 0
		now := e.nowMS()
		en := Entry{AtMS: now, Kind: KindDeferRejected, CallID: a.CallID,
			Detail: map[string]any{"reason": string(reason), "handle": handle}}
		if j != nil {
			en.Handle = j.Handle
		}
		err := e.record(ctx, e.note(a.Tenant, a.SessionID, a.CallID, now, en), Change{Event: EventDeferRejected, Job: j})
		return ack, err
	}
	if !ValidHandle(handle) {
		return reject(frames.AckInvalidHandle, nil)
	}
	j, err := e.resolve(ctx, Addr{Tenant: a.Tenant, SessionID: a.SessionID, CallID: a.CallID})
	if errors.Is(err, ErrUnknownCall) {
		return reject(frames.AckUnknownCall, nil)
	}
	if err != nil {
		return ack, err
	}
	if j.State == Deferred && j.Handle == handle {
		// A repeat, answered with no transition that would find a stale view out: the job may
		// have ended through another node whose change has not arrived. The store decides.
		if j, err = e.load(ctx, a.Tenant, a.CallID, true); err != nil {
			return ack, err
		}
	}
	var reason frames.DeferAckReason
	err = e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		reason = ""
		switch {
		case j.State == Deferred && j.Handle == handle:
			ack.Accepted, ack.DeadlineMS = true, j.DeferredDLMS
			return nil, nil
		case j.State != Pending:
			reason = frames.AckCallNotPending
		case !j.Tool.Deferred:
			reason = frames.AckNotDeferrable
		case IsBrokerCallID(handle):
			reason = frames.AckHandleReserved
		}
		if reason != "" {
			return nil, nil
		}
		next := j.edit()
		next.State, next.Handle, next.StatusLabel = Deferred, handle, statusLabel
		next.DeferredMS = now
		next.DeferredDLMS = now + next.Tool.deferredTimeout().Milliseconds()
		t := e.write(j, next, now, entry(now, KindDeferred, next,
			map[string]any{"status_label": statusLabel, "deadline_ms": next.DeferredDLMS}))
		t.Handle = &HandleOp{Handle: handle, CallID: j.CallID, Claim: true,
			TTL: next.Tool.deferredTimeout() + e.opts.Retention}
		ack.Accepted, ack.DeadlineMS = true, next.DeferredDLMS
		if out != nil {
			out.Data = out.Render(ack)
			t.Frame = out
		}
		return &plan{t: t, change: Change{Event: EventDeferred}}, nil
	})
	if he, ok := errHandleTaken(err); ok {
		if he.Record.Burned {
			return reject(frames.AckHandleBurned, j)
		}
		return reject(frames.AckHandleInUse, j)
	}
	if err != nil {
		return frames.ToolDeferredAck{CallID: a.CallID, Handle: handle}, err
	}
	if reason != "" {
		return reject(reason, j)
	}
	return ack, nil
}
