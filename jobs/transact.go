package jobs

import (
	"context"
	"errors"
)

// plan is what a decision step wants applied: a transition and the change to report once it is.
type plan struct {
	t      *Transition
	change Change
}

// step decides, from the freshest record of a job and the time, what to do. It returns nil to
// apply nothing; its results reach the operation through the closure.
type step func(j *Job, now int64) (*plan, error)

// run decides and applies against j, deciding again from a fresh record each time it loses a
// race, until a decision is applied or needs nothing. Applied changes are reported to OnChange
// and, for a job that was cancelled or timed out, its children are closed afterwards.
func (e *Engine) run(ctx context.Context, j *Job, decide step) error {
	for attempt := 0; ; attempt++ {
		p, err := decide(j, e.nowMS())
		if err != nil || p == nil || p.t == nil {
			return err
		}
		err = e.commit(ctx, p.t)
		if isConflict(err) && attempt < maxAttempts {
			j, err = e.load(ctx, j.Tenant, j.CallID, true)
			if err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if p.t.Frame != nil {
			p.t.Frame.Applied = true
		}
		e.applied(ctx, p)
		return nil
	}
}

// applied reports an applied plan and runs what follows from it.
func (e *Engine) applied(ctx context.Context, p *plan) {
	c := p.change
	c.Entries = p.t.Entries
	if p.t.Job != nil {
		c.Job = p.t.Job
		c.From = p.t.From
	}
	e.notify(c)
	if p.t.Cascade && p.t.Terminated() && len(p.t.Children) > 0 {
		if err := e.cascade(ctx, p.t.Tenant, p.t.CallID, p.t.Children); err != nil {
			// The store holds a cascade marker: another Tick finishes the job.
			e.log.Warn("jobs: cascade deferred to the scheduler", "call_id", p.t.CallID, "err", err)
		}
	}
}

// write builds the transition that replaces j by next (a modified clone of j), recomputing its
// deadline and version. A transition into cancelled or timed_out carries the cascade marker
// request, and one into any terminal state burns the job's handle.
func (e *Engine) write(j, next *Job, now int64, entries ...Entry) *Transition {
	next.Version = j.Version + 1
	next.DeadlineMS = next.deadline(e.opts.PermissionTimeout)
	t := &Transition{
		Tenant:    j.Tenant,
		SessionID: j.SessionID,
		CallID:    j.CallID,
		Check:     true,
		Expect:    j.Version,
		Job:       next,
		From:      j.State,
		Entries:   entries,
		NowMS:     now,
		LeaseMS:   e.opts.ClaimLease.Milliseconds(),
	}
	if next.State.Terminal() && !j.State.Terminal() {
		next.FinishedMS = now
		next.DeadlineMS = 0
		if ia := next.Interaction; ia != nil {
			next.close(ia.ID, InteractionEnded)
			t.Entries = append(t.Entries, entry(now, KindInteraction, next,
				map[string]any{"interaction_id": ia.ID, "state": InteractionEnded}))
		}
		if next.Handle != "" {
			t.Handle = &HandleOp{Handle: next.Handle, CallID: next.CallID, TTL: e.opts.Retention}
		}
		t.Cascade = next.State == Cancelled || next.State == TimedOut
	}
	return t
}

// checked builds a transition that writes no job but applies only while j is unchanged.
func (e *Engine) checked(j *Job, now int64, entries ...Entry) *Transition {
	return &Transition{Tenant: j.Tenant, SessionID: j.SessionID, CallID: j.CallID,
		Check: true, Expect: j.Version, Entries: entries, NowMS: now}
}

// note builds a transition that only records timeline entries of a session.
func (e *Engine) note(tenant, sessionID, callID string, now int64, entries ...Entry) *Transition {
	return &Transition{Tenant: tenant, SessionID: sessionID, CallID: callID, Entries: entries, NowMS: now}
}

// record applies a timeline-only transition outside any race (a rejected request about a job
// that may not exist).
func (e *Engine) record(ctx context.Context, t *Transition, c Change) error {
	if err := e.commit(ctx, t); err != nil {
		return err
	}
	e.applied(ctx, &plan{t: t, change: c})
	return nil
}

// close marks interaction id closed with how, clearing it when it is the open one.
func (j *Job) close(id, how string) {
	if j.Closed == nil {
		j.Closed = make(map[string]string)
	}
	j.Closed[id] = how
	if j.Interaction != nil && j.Interaction.ID == id {
		j.Interaction = nil
	}
}

// errHandleTaken reports whether err is a handle claim that found the handle taken.
func errHandleTaken(err error) (*HandleTakenError, bool) {
	var he *HandleTakenError
	ok := errors.As(err, &he)
	return he, ok
}
