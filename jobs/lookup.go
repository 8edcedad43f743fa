package jobs

import (
	"context"
	"errors"
	"time"
)

// Lookup returns the job a session addresses by call id or handle, or ErrUnknownCall.
func (e *Engine) Lookup(ctx context.Context, a Addr) (*Job, error) {
	return e.resolve(ctx, a)
}

// OpenJobs returns the session's non-terminal jobs, with their arguments, oldest first.
func (e *Engine) OpenJobs(ctx context.Context, tenant, sessionID string) ([]*Job, error) {
	var ids []string
	err := e.retry(ctx, func() error {
		var err error
		ids, err = e.store.OpenJobs(ctx, tenant, sessionID)
		return err
	})
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

func sortByCreation(js []*Job) {
	for i := 1; i < len(js); i++ {
		for k := i; k > 0 && (js[k].CreatedMS < js[k-1].CreatedMS ||
			(js[k].CreatedMS == js[k-1].CreatedMS && js[k].CallID < js[k-1].CallID)); k-- {
			js[k], js[k-1] = js[k-1], js[k]
		}
	}
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
	var out []Entry
	err := e.retry(ctx, func() error {
		var err error
		out, err = e.store.Timeline(ctx, tenant, sessionID, from)
		return err
	})
	return out, err
}

// Retention is how long the engine keeps what ended.
func (e *Engine) Retention() time.Duration { return e.opts.Retention }
