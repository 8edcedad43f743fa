package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store makes transitions durable and atomic. Every implementation must pass the conformance
// suite in jobs/storetest; the engine relies on nothing else.
type Store interface {
	// Apply applies t atomically: all of it or none of it. It returns a *ConflictError when the
	// job's version is not t.Expect, and a *HandleTakenError when t claims a handle that exists.
	// Applying a job-writing transition a second time (same ID) after it was applied succeeds
	// without applying it again, as long as no other transition of the job came in between
	// (the job remembers the id of its last transition). A transition that writes no job is
	// not recognised: its retry may append its timeline entries twice.
	Apply(ctx context.Context, t *Transition) error
	// Job returns the record of a job with its arguments, or ErrNotFound.
	Job(ctx context.Context, tenant, callID string) (*Job, error)
	// Handle returns the call a handle names and whether its job has ended (burned), or ErrNotFound.
	Handle(ctx context.Context, tenant, handle string) (HandleRecord, error)
	// ClaimDue claims up to limit jobs of the tenant whose deadline is at or before now, each
	// for lease: another ClaimDue sees it again only when the lease ran out and no transition
	// moved its deadline meanwhile. A job whose recorded deadline is later than now is put back
	// in order and not returned.
	// A due cascade marker (see Transition.Cascade) is claimed the same way.
	ClaimDue(ctx context.Context, tenant string, now time.Time, lease time.Duration, limit int) ([]Due, error)
	// DoneCascade removes the cascade marker of callID once its children are closed.
	DoneCascade(ctx context.Context, tenant, callID string) error
	// OpenJobs returns the call ids of the session's non-terminal jobs.
	OpenJobs(ctx context.Context, tenant, sessionID string) ([]string, error)
	// Children returns the call ids of the jobs whose ParentCallID is callID, open or ended
	// (they are kept as long as the parent is: the cascade goes through an ended child to its
	// open descendants).
	Children(ctx context.Context, tenant, callID string) ([]string, error)
	// Timeline returns the session's timeline entries from index from on (0: all), oldest first.
	Timeline(ctx context.Context, tenant, sessionID string, from int) ([]Entry, error)
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
}

// Transition is one atomic change: an optional job write guarded by the job's version, an
// optional handle claim or burn, and timeline entries. The store derives the rest from the
// written job: its deadline entry, its place in the session's open set and its parent's
// children set, and its retention once terminal.
type Transition struct {
	// ID names the transition; a retry of it is recognised as already applied.
	ID        string
	Tenant    string
	SessionID string
	// CallID is the job checked and/or written.
	CallID string
	// Check makes the transition conditional on the job's version being Expect (0: the job must
	// not exist). A job write is always checked.
	Check  bool
	Expect int64
	// Job is the new record (Version must be Expect+1), or nil to write no job.
	Job *Job
	// From is the job's state before the transition ("" when it is created).
	From State
	// Handle claims or burns a handle in the same step, or is nil.
	Handle *HandleOp
	// Entries are appended to the session's timeline, whole or cut by the timeline's cap.
	Entries []Entry
	// TimelineMax caps the session's timeline (bytes; 0: no cap): the store keeps the sum of the
	// encoded sizes of the entries offered to the timeline and, in the same atomic step as the
	// append, stores an entry that takes the sum past TimelineMax, and every later one, in its
	// CutEntry form, the first of them preceded by TimelineNotice (see timelinecap.go).
	TimelineMax int64
	// Retention is how long a terminal job, a burned handle and the timeline are kept (a
	// timeline's retention runs from its first entry and is renewed each time a job ends).
	Retention time.Duration
	// NowMS is the time of the transition (epoch ms).
	NowMS int64
	// Cascade asks the store, when the job ends with children, to record a cascade marker
	// due at NowMS+LeaseMS in the deadline index: if the engine dies before closing the
	// children, ClaimDue hands the marker to another engine.
	Cascade bool
	LeaseMS int64
	// Frame, when set, is appended to a slot's outbox in the same atomic step (FrameOut).
	Frame *FrameOut
	// ClearCascade, when set, names an ended parent call whose cascade marker the transition
	// removes (the engine's cascade closes that parent's last child with it; DoneCascade does
	// the same on its own).
	ClearCascade string

	// Children is set by Apply when Cascade was asked and the ending job has children: their
	// call ids, sorted (the store recorded the cascade marker). A retried transition that was
	// applied before reports them too. The engine closes them without asking the store again;
	// a job without children costs no further request.
	Children []string
	// ParentState is set by Apply when it creates a job with a ParentCallID: the state of the
	// parent job in the same atomic step that added the job to its parent's children ("" when
	// the store does not hold the parent). Either the parent had already been cancelled or
	// timed out, and the engine closes the new job at once, or the parent's own terminal
	// transition comes later and finds the new job among its Children: never both, never
	// neither (SPEC 11).
	ParentState State
}

// Created reports whether the transition creates its job.
func (t *Transition) Created() bool { return t.Job != nil && t.Expect == 0 }

// Terminated reports whether the transition moves its job into a terminal state.
func (t *Transition) Terminated() bool {
	return t.Job != nil && t.Job.State.Terminal() && !t.From.Terminal()
}

// Due is one claimed deadline: a job whose clock ran out, or the cascade marker of a job whose
// children still have to be closed.
type Due struct {
	Job     *Job
	Cascade string // call id of the ended parent, when this is a cascade marker
}

// HandleOp is the handle part of a transition.
type HandleOp struct {
	Handle string
	CallID string
	// Claim takes a fresh handle for CallID (it fails if the handle exists at all); otherwise the
	// handle is marked burned (its job ended).
	Claim bool
	// TTL is how long the handle key lives from now.
	TTL time.Duration
}

// HandleRecord is what a store knows of a handle.
type HandleRecord struct {
	CallID string
	Burned bool // its job has ended; the handle is never reusable
}

// ErrNotFound is returned for a job or handle the store does not hold.
var ErrNotFound = errors.New("jobs: not found")

// ConflictError means the job's version was not the expected one: another transition won.
type ConflictError struct {
	CallID  string
	Version int64 // the version found (0: no such job)
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("jobs: job %s changed concurrently (now at version %d)", e.CallID, e.Version)
}

// HandleTakenError means a handle claim found the handle already held or burned.
type HandleTakenError struct {
	Handle string
	Record HandleRecord
}

func (e *HandleTakenError) Error() string {
	state := "in use"
	if e.Record.Burned {
		state = "burned"
	}
	return fmt.Sprintf("jobs: handle %q is %s (call %s)", e.Handle, state, e.Record.CallID)
}
