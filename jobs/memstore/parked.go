package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

// parked is a parked session with the time it is forgotten (ms).
type parked struct {
	p       cluster.ParkedSession
	expires int64
}

var _ cluster.Parking = (*Store)(nil)

// ParkSession implements cluster.Parking.
func (s *Store) ParkSession(ctx context.Context, p cluster.ParkedSession, retention time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.State = slices.Clone(p.State)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parked[p.SessionID] = parked{p: p, expires: p.ExpiresMS + retention.Milliseconds()}
	return nil
}

// TakeParked implements cluster.Parking.
func (s *Store) TakeParked(ctx context.Context, tenant, sessionID string) (*cluster.ParkedSession, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.parked[sessionID]
	if ok && x.expires <= s.now() {
		delete(s.parked, sessionID)
		ok = false
	}
	if !ok || (tenant != "" && x.p.Tenant != tenant) {
		return nil, jobs.ErrNotFound // another tenant's session is left alone
	}
	delete(s.parked, sessionID)
	s.unhold(x.p.Tenant, sessionID)
	return &x.p, nil
}

// DueParked implements cluster.Parking.
func (s *Store) DueParked(ctx context.Context, tenant string, now time.Time) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	type due struct {
		id string
		at int64
	}
	var out []due
	nowMS := now.UnixMilli()
	for id, x := range s.parked {
		if x.expires <= s.now() {
			delete(s.parked, id)
			continue
		}
		if x.p.Tenant == tenant && x.p.ExpiresMS <= nowMS {
			out = append(out, due{id, x.p.ExpiresMS})
		}
	}
	slices.SortFunc(out, func(a, b due) int { return cmp.Compare(a.at, b.at) })
	ids := make([]string, len(out))
	for i, d := range out {
		ids[i] = d.id
	}
	return ids, nil
}
