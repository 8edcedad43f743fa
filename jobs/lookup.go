package jobs

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// Lookup returns the job a session addresses by call id or handle, or ErrUnknownCall.
func (e *Engine) Lookup(ctx context.Context, a Addr) (*Job, error) {
	return e.resolve(ctx, a)
}

// Reload returns the job of session a by call id as the store has it now — not as this engine
// last saw it: another node may have changed it since (a deadline it fired, a cancel through
// it) and its change may never have reached this one. The engine's cache takes the new state.
func (e *Engine) Reload(ctx context.Context, a Addr) (*Job, error) {
	j, err := e.load(ctx, a.Tenant, a.CallID, true)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrUnknownCall
	}
	if err != nil {
		return nil, err
	}
	if j.SessionID != a.SessionID {
		return nil, ErrUnknownCall
	}
	return j, nil
}

// Cached returns the open job tenant's callID as the engine last saw it, without asking the
// store; nil when the engine has no open job of that id (it saw it end, or never loaded it).
// The job must not be modified.
func (e *Engine) Cached(tenant, callID string) *Job { return e.cached(tenant, callID) }

// OpenJobs returns the session's non-terminal jobs, with their arguments, oldest first.
func (e *Engine) OpenJobs(ctx context.Context, tenant, sessionID string) ([]*Job, error) {
	ids, err := read(ctx, e, func() ([]string, error) { return e.store.OpenJobs(ctx, tenant, sessionID) })
	if err != nil {
		return nil, err
	}
	out := make([]*Job, 0, len(ids))
	for _, id := range ids {
		j, err := e.load(ctx, tenant, id, true)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if IsOpen(j.State) {
			out = append(out, j)
		}
	}
	sortByCreation(out)
	return out, nil
}

// sortByCreation orders jobs oldest first (call id between equals).
func sortByCreation(js []*Job) {
	slices.SortFunc(js, func(a, b *Job) int {
		return cmp.Or(cmp.Compare(a.CreatedMS, b.CreatedMS), strings.Compare(a.CallID, b.CallID))
	})
}

// Record appends entries to a session's timeline (events of the session rather than of a job:
// disconnect, resume, session_end, notice …). Entries without a time get the engine's now.
func (e *Engine) Record(ctx context.Context, tenant, sessionID string, entries ...Entry) error {
	now := e.nowMS()
	for i := range entries {
		if entries[i].AtMS == 0 {
			entries[i].AtMS = now
		}
		if entries[i].Detail == nil {
			entries[i].Detail = map[string]any{}
		}
	}
	return e.record(ctx, e.note(tenant, sessionID, "", now, entries...), Change{Event: EventRecorded})
}

// Timeline returns the session's timeline from index from on.
func (e *Engine) Timeline(ctx context.Context, tenant, sessionID string, from int) ([]Entry, error) {
	return read(ctx, e, func() ([]Entry, error) { return e.store.Timeline(ctx, tenant, sessionID, from) })
}

// Retention is how long the engine keeps what ended.
func (e *Engine) Retention() time.Duration { return e.opts.Retention }
