package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// claimBatch is how many due deadlines one ClaimDue takes.
const claimBatch = 256

// Tick fires every deadline due at now, for every tenant the engine knows (SPEC 5, 7, 12): a
// pending or deferred job times out (tool_deadline_timeout; the host is to get tool_cancel
// reason timeout; its children are closed), a job awaiting permission is declined. Each due
// deadline is claimed from the store by exactly one engine, and the transition is
// compare-and-set, so a deadline fires once even when several engines share the store and a
// result arrives at the same instant. A cascade that a dead engine left unfinished is finished
// here. It returns how many jobs it closed.
func (e *Engine) Tick(ctx context.Context, now time.Time) (int, error) {
	e.mu.Lock()
	tenants := make([]string, 0, len(e.tenants))
	for t := range e.tenants {
		tenants = append(tenants, t)
	}
	e.mu.Unlock()
	fired := 0
	var firstErr error
	for _, tenant := range tenants {
		for {
			due, err := read(ctx, e, func() ([]Due, error) {
				return e.store.ClaimDue(ctx, tenant, now, e.opts.ClaimLease, claimBatch)
			})
			if err != nil {
				firstErr = cmpErr(firstErr, err)
				break
			}
			n, err := e.fire(ctx, tenant, due, ms(now))
			fired += n
			firstErr = cmpErr(firstErr, err)
			if len(due) < claimBatch {
				break
			}
		}
	}
	return fired, firstErr
}

// fireParallelism is how many due deadlines of one claimed batch are fired at once: their
// transitions are independent jobs, and a store that pipelines (Redis) sends them together.
const fireParallelism = 64

// fire closes the due jobs and finishes the due cascades of one claimed batch, concurrently.
// It returns how many jobs it closed and the first error.
func (e *Engine) fire(ctx context.Context, tenant string, due []Due, now int64) (int, error) {
	var (
		mu       sync.Mutex
		fired    int
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, fireParallelism)
	for _, d := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var ok bool
			var err error
			if d.Cascade != "" {
				err = e.cascade(ctx, tenant, d.Cascade, nil)
			} else {
				ok, err = e.expire(ctx, d.Job, now)
			}
			mu.Lock()
			if ok {
				fired++
			}
			firstErr = cmpErr(firstErr, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return fired, firstErr
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// expire closes j if its deadline has come by now: timed_out for a pending or deferred job,
// declined for one awaiting permission. It reports whether it closed the job.
func (e *Engine) expire(ctx context.Context, j *Job, now int64) (bool, error) {
	e.remember(j)
	fired := false
	err := e.run(ctx, j, func(j *Job, _ int64) (*plan, error) {
		fired = false
		if !IsOpen(j.State) || j.DeadlineMS == 0 || j.DeadlineMS > now {
			return nil, nil
		}
		fired = true
		next := j.edit()
		if j.State == AwaitingPermission {
			next.State = Declined
			d := Decision{Verdict: Decline, Reason: "permission_timeout"}
			return &plan{t: e.write(j, next, now, entry(now, KindPermission, j, d.detail())), change: Change{Event: EventDeclined}}, nil
		}
		clock := "ordinary"
		if j.State == Deferred {
			clock = "deferred"
		}
		next.State, next.CancelReason = TimedOut, string(frames.CancelTimeout)
		t := e.write(j, next, now, entry(now, KindToolDeadlineTimeout, j,
			map[string]any{"clock": clock, "deadline_ms": j.DeadlineMS}))
		return &plan{t: t, change: Change{Event: EventTimedOut}}, nil
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return fired && err == nil, err
}

// Run fires deadlines until ctx ends: at each deadline the engine set itself (a heap of the
// nearest ones, not a timer per job) and every PollInterval for deadlines set by other engines
// sharing the store. It is meant for the real clock; tests with a FakeClock call Tick.
func (e *Engine) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastTick int64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.wake:
		case <-timer.C:
			now := e.Now()
			lastTick = ms(now)
			if _, err := e.Tick(ctx, now); err != nil && ctx.Err() == nil {
				e.log.Warn("jobs: firing deadlines", "err", err)
			}
		}
		now := e.Now()
		next := now.Add(e.opts.PollInterval)
		// A local deadline at or before the last tick is held by another engine's claim: the
		// poll picks it up if that engine dies.
		if at, ok := e.nextLocal(); ok && at > lastTick && at < ms(next) {
			next = time.UnixMilli(at)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(next.Sub(now), 0))
	}
}

// nextLocal is the nearest deadline of the engine's own open jobs.
func (e *Engine) nextLocal() (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.timers.next()
}
