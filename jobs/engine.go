package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Options configure an Engine. The zero value of every field means its documented default.
type Options struct {
	// Clock tells the time; default SystemClock.
	Clock Clock
	// Retention is how long a terminal job, a burned handle and a timeline are remembered
	// (default 7 days; never less than the longest deferred timeout, 24 h).
	Retention time.Duration
	// PermissionTimeout is how long a spoken permission ask waits for a clear answer (default 120 s).
	PermissionTimeout time.Duration
	// StoreRetry bounds how long a store error is retried before it is returned (default 3 s).
	StoreRetry time.Duration
	// ClaimLease is how long a claimed deadline stays with the node that claimed it (default 10 s):
	// if that node dies before firing it, another node fires it after the lease.
	ClaimLease time.Duration
	// PollInterval is how often Run looks for deadlines it did not set itself (default 100 ms).
	PollInterval time.Duration
	// TimelineMaxBytes caps each session's timeline (SPEC 18 --timeline-max-bytes; default
	// DefaultTimelineMaxBytes, 4 MiB; negative: no cap). Past it, entries keep their kind and ids
	// but their detail values are cut to CutBytes (CutEntry), and one notice says so.
	TimelineMaxBytes int
	// Tenants whose deadlines this engine polls from the start (tenants it creates jobs for are
	// added as it goes).
	Tenants []string
	// OnChange is called after every transition the engine applied, in the goroutine that
	// applied it. It must not block for long.
	OnChange func(Change)
	// Logger receives the engine's logs; default slog.Default().
	Logger *slog.Logger
}

// Change reports one applied transition.
type Change struct {
	Event Event
	// From is the state before the transition ("" for a created job).
	From State
	// Job is the job after the transition (for a transition that writes no job, the job as it
	// was checked). It is shared: it must not be modified.
	Job *Job
	// Entries are the timeline entries the transition recorded, whole: the timeline may hold
	// them cut (Options.TimelineMaxBytes).
	Entries []Entry
	// Interaction is the interaction the event is about, for interaction events.
	Interaction *Interaction
	// Superseded is the id of an interaction a new one closed, for EventInteractionOpened.
	Superseded string
}

// Event says what a Change did.
type Event string

// The events of a Change.
const (
	EventCreated           Event = "created"
	EventApproved          Event = "approved"
	EventDeferred          Event = "deferred"
	EventProgress          Event = "progress"
	EventPartial           Event = "partial"
	EventInteractionOpened Event = "interaction_opened"
	EventInteractionClosed Event = "interaction_closed"
	EventPermissionAsked   Event = "permission_asked"
	EventPermissionHeld    Event = "permission_held"
	EventCompleted         Event = "completed"
	EventFailed            Event = "failed"
	EventCancelled         Event = "cancelled"
	EventTimedOut          Event = "timed_out"
	EventDeclined          Event = "declined"
	EventLateResultDropped Event = "late_result_dropped"
	EventDuplicateCancel   Event = "duplicate_cancel"
	EventDeferRejected     Event = "defer_rejected"
	EventRecorded          Event = "recorded" // timeline entries only (Engine.Record)
)

// Terminal reports whether the event is a job reaching one of its terminal states (a Change
// whose From is already terminal changed nothing).
func (e Event) Terminal() bool {
	switch e {
	case EventCompleted, EventFailed, EventCancelled, EventTimedOut, EventDeclined:
		return true
	}
	return false
}

// Engine runs the job lifecycle against a Store. It is safe for concurrent use; several
// engines (nodes) may share one store.
type Engine struct {
	store Store
	opts  Options
	log   *slog.Logger

	shards [cacheShards]cacheShard // the open jobs this engine has seen, by call id

	mu      sync.Mutex // guards tenants and timers
	tenants map[string]struct{}
	timers  timerHeap // the deadlines of the jobs in the cache, one entry each
	wake    chan struct{}
}

// cacheShards splits the engine's cache so that concurrent sessions rarely share a lock.
const cacheShards = 64

// cacheShard holds the open jobs whose call id hashes to it, and the handles that hash to it.
type cacheShard struct {
	mu      sync.Mutex
	open    map[jobKey]*Job      // newest version of each open job (never modified)
	handles map[handleKey]string // handle → call id
}

// shard returns the cache shard of a key (FNV-1a).
func (e *Engine) shard(key string) *cacheShard {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &e.shards[h%cacheShards]
}

type jobKey struct{ tenant, callID string }
type handleKey struct{ tenant, handle string }

// NewEngine returns an engine over store.
func NewEngine(store Store, opts Options) *Engine {
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	opts.Retention = max(opts.Retention, MaxDeferredTimeout)
	if opts.PermissionTimeout <= 0 {
		opts.PermissionTimeout = DefaultPermissionTimeout
	}
	if opts.StoreRetry <= 0 {
		opts.StoreRetry = 3 * time.Second
	}
	if opts.ClaimLease <= 0 {
		opts.ClaimLease = 10 * time.Second
	}
	if opts.TimelineMaxBytes == 0 {
		opts.TimelineMaxBytes = DefaultTimelineMaxBytes
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{
		store:   store,
		opts:    opts,
		log:     opts.Logger,
		tenants: make(map[string]struct{}),
		timers:  timerHeap{at: make(map[jobKey]*timer)},
		wake:    make(chan struct{}, 1),
	}
	for _, t := range opts.Tenants {
		e.tenants[t] = struct{}{}
	}
	for i := range e.shards {
		e.shards[i].open = make(map[jobKey]*Job)
		e.shards[i].handles = make(map[handleKey]string)
	}
	return e
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.opts.Clock.Now() }

func (e *Engine) nowMS() int64 { return ms(e.opts.Clock.Now()) }

// Errors an operation answers with, in the words of SPEC 2.1.
var (
	// ErrUnknownCall: no job of the session has that call id or handle.
	ErrUnknownCall = errors.New("unknown_call")
	// ErrCallFinished: the job has reached its terminal state.
	ErrCallFinished = errors.New("call_finished")
	// ErrCallNotPending: the job is in no state to take the request.
	ErrCallNotPending = errors.New("call_not_pending")
)

// Addr addresses a job from a session: by broker call id or by handle (exactly one). A job of
// another session or tenant is unknown to it.
type Addr struct {
	Tenant    string
	SessionID string
	CallID    string
	Handle    string
}

// cached returns the open job the engine holds, or nil. The record is shared: it must not be
// modified (a step clones it before changing anything).
func (e *Engine) cached(tenant, callID string) *Job {
	sh := e.shard(callID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.open[jobKey{tenant, callID}]
}

// remember records j as the newest version the engine knows of an open job, and forgets a job
// that ended. The engine takes j over: nobody may modify it afterwards.
func (e *Engine) remember(j *Job) {
	k := jobKey{j.Tenant, j.CallID}
	sh := e.shard(j.CallID)
	sh.mu.Lock()
	old := sh.open[k]
	if old != nil && old.Version >= j.Version {
		sh.mu.Unlock()
		return
	}
	var dropHandle, addHandle string
	if old != nil && old.Handle != "" && (old.Handle != j.Handle || j.State.Terminal()) {
		dropHandle = old.Handle
	}
	deadline := int64(0)
	if j.State.Terminal() {
		delete(sh.open, k)
	} else {
		sh.open[k] = j
		addHandle = j.Handle
		deadline = j.DeadlineMS
	}
	sh.mu.Unlock()
	if dropHandle != "" {
		hs := e.shard(dropHandle)
		hs.mu.Lock()
		delete(hs.handles, handleKey{j.Tenant, dropHandle})
		hs.mu.Unlock()
	}
	if addHandle != "" {
		hs := e.shard(addHandle)
		hs.mu.Lock()
		hs.handles[handleKey{j.Tenant, addHandle}] = j.CallID
		hs.mu.Unlock()
	}
	e.mu.Lock()
	if _, ok := e.tenants[j.Tenant]; !ok {
		e.tenants[j.Tenant] = struct{}{}
	}
	nearest := e.timers.set(k, deadline)
	e.mu.Unlock()
	if nearest {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// load returns the newest record of a job: the engine's own copy unless fresh is set or it has
// none, else the store's. ErrNotFound when neither has it.
func (e *Engine) load(ctx context.Context, tenant, callID string, fresh bool) (*Job, error) {
	if !fresh {
		if j := e.cached(tenant, callID); j != nil {
			return j, nil
		}
	}
	j, err := read(ctx, e, func() (*Job, error) { return e.store.Job(ctx, tenant, callID) })
	if err != nil {
		return nil, err
	}
	e.remember(j)
	return j, nil
}

// resolve finds the call id a session addresses, by call id or handle. It answers
// ErrUnknownCall for anything the session may not see.
func (e *Engine) resolve(ctx context.Context, a Addr) (*Job, error) {
	callID := a.CallID
	if callID == "" {
		if a.Handle == "" {
			return nil, ErrUnknownCall
		}
		hs := e.shard(a.Handle)
		hs.mu.Lock()
		callID = hs.handles[handleKey{a.Tenant, a.Handle}]
		hs.mu.Unlock()
		if callID == "" {
			rec, err := read(ctx, e, func() (HandleRecord, error) { return e.store.Handle(ctx, a.Tenant, a.Handle) })
			if errors.Is(err, ErrNotFound) {
				return nil, ErrUnknownCall
			}
			if err != nil {
				return nil, err
			}
			callID = rec.CallID
		}
	}
	j, err := e.load(ctx, a.Tenant, callID, false)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrUnknownCall
	}
	if err != nil {
		return nil, err
	}
	if j.SessionID != a.SessionID || (a.Handle != "" && j.Handle != a.Handle) {
		return nil, ErrUnknownCall
	}
	return j, nil
}

// retry runs op until it succeeds, fails permanently, or StoreRetry has passed.
func (e *Engine) retry(ctx context.Context, op func() error) error {
	err := op()
	var perm *backoff.PermanentError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &perm):
		return perm.Err
	case ctx.Err() != nil:
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	b.MaxInterval = 500 * time.Millisecond
	b.MaxElapsedTime = e.opts.StoreRetry
	err = backoff.Retry(op, backoff.WithContext(b, ctx))
	if errors.As(err, &perm) {
		return perm.Err
	}
	return err
}

// read runs a store read with the engine's retry. ErrNotFound is an answer, not retried.
func read[T any](ctx context.Context, e *Engine, op func() (T, error)) (T, error) {
	var out T
	err := e.retry(ctx, func() error {
		v, err := op()
		if errors.Is(err, ErrNotFound) {
			return backoff.Permanent(err)
		}
		out = v
		return err
	})
	return out, err
}

// commit applies t, retrying store errors (a retry of the same transition is idempotent). A
// version conflict or a taken handle is returned at once for the caller to decide again.
func (e *Engine) commit(ctx context.Context, t *Transition) error {
	if t.ID == "" {
		t.ID = newTransitionID()
	}
	t.Retention = e.opts.Retention
	t.TimelineMax = max(int64(e.opts.TimelineMaxBytes), 0)
	err := e.retry(ctx, func() error {
		err := e.store.Apply(ctx, t)
		var ce *ConflictError
		var he *HandleTakenError
		if errors.As(err, &ce) || errors.As(err, &he) {
			return backoff.Permanent(err)
		}
		if err != nil {
			e.log.Warn("jobs: store apply failed, retrying", "call_id", t.CallID, "err", err)
		}
		return err
	})
	if err != nil {
		var ce *ConflictError
		var he *HandleTakenError
		if errors.As(err, &ce) || errors.As(err, &he) {
			return err
		}
		if !e.appliedAfterAll(ctx, t) {
			return fmt.Errorf("jobs: store: %w", err)
		}
	}
	if t.Job != nil {
		e.remember(t.Job)
	}
	return nil
}

// appliedAfterAll reports, for a transition whose commit failed with a store error, whether
// the store applied it all the same (the script ran; its answer was lost as Redis went down).
// It asks only for a transition that appends a frame to an outbox (FrameOut), retrying for
// StoreRetry once more while the store does not answer: the session
// takes such a frame's seq only when the transition applied, so a frame journaled unknown to
// it would take the seq of the session's next frame. The job as the store has it now tells:
// the version the transition wrote, in the state it wrote.
func (e *Engine) appliedAfterAll(ctx context.Context, t *Transition) bool {
	if t.Frame == nil || t.Job == nil {
		return false
	}
	got, err := read(ctx, e, func() (*Job, error) { return e.store.Job(ctx, t.Tenant, t.CallID) }) // StoreRetry again
	return err == nil && got.Version == t.Job.Version && got.State == t.Job.State && got.Handle == t.Job.Handle
}

// notify reports an applied change.
func (e *Engine) notify(c Change) {
	if e.opts.OnChange != nil {
		e.opts.OnChange(c)
	}
}

// maxAttempts bounds how often one operation re-decides after losing a race.
const maxAttempts = 64

// isConflict reports whether err is a version conflict.
func isConflict(err error) bool {
	var ce *ConflictError
	return errors.As(err, &ce)
}
