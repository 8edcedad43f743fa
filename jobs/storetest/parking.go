package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

// runParking checks cluster.Parking, which every store shared by several nodes offers (and
// the memory store too, for nodes in one process): a parked session is taken exactly once,
// with or without its tenant, by concurrent takers; DueParked lists a tenant's sessions whose
// resume window ended, oldest first, and no other tenant's.
func runParking(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.NewFakeClock(epoch))
	pk, ok := s.(cluster.Parking)
	if !ok {
		t.Fatalf("%T does not implement cluster.Parking", s)
	}
	ctx := context.Background()
	now := time.Now()
	park := func(tenant, id string, expires time.Time, state string) {
		t.Helper()
		if err := pk.ParkSession(ctx, cluster.ParkedSession{Tenant: tenant, SessionID: id, ExpiresMS: expires.UnixMilli(),
			State: []byte(state)}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	park(tenantA, "sess_late", now.Add(3*time.Second), `{"n":1}`)
	park(tenantA, "sess_early", now.Add(time.Second), `{"n":2}`)
	park(tenantB, "sess_other", now.Add(time.Second), `{"n":3}`)

	if ids, err := pk.DueParked(ctx, tenantA, now); err != nil || len(ids) != 0 {
		t.Errorf("DueParked before any window ended: %v, %v; want none", ids, err)
	}
	ids, err := pk.DueParked(ctx, tenantA, now.Add(5*time.Second))
	if err != nil || !slices.Equal(ids, []string{"sess_early", "sess_late"}) {
		t.Errorf("DueParked of %s: %v, %v; want [sess_early sess_late] (oldest first, not the other tenant's)", tenantA, ids, err)
	}

	// Concurrent takers, without the tenant: exactly one gets it, whole.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []*cluster.ParkedSession
	misses := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := pk.TakeParked(ctx, "", "sess_late")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got = append(got, p)
			case errors.Is(err, jobs.ErrNotFound):
				misses++
			default:
				t.Errorf("TakeParked: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || misses != 7 {
		t.Fatalf("8 concurrent takers: %d got the session, %d got ErrNotFound; want 1 and 7", len(got), misses)
	}
	if p := got[0]; p.Tenant != tenantA || p.SessionID != "sess_late" || string(p.State) != `{"n":1}` ||
		p.ExpiresMS != now.Add(3*time.Second).UnixMilli() {
		t.Errorf("taken: %+v", p)
	}
	if ids, _ := pk.DueParked(ctx, tenantA, now.Add(5*time.Second)); !slices.Equal(ids, []string{"sess_early"}) {
		t.Errorf("DueParked after the take: %v, want [sess_early]", ids)
	}
	// With a tenant: only that tenant's session.
	if _, err := pk.TakeParked(ctx, tenantB, "sess_early"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("TakeParked of another tenant's session: %v, want ErrNotFound", err)
	}
	if p, err := pk.TakeParked(ctx, tenantA, "sess_early"); err != nil || string(p.State) != `{"n":2}` {
		t.Errorf("TakeParked with its tenant: %+v, %v", p, err)
	}
	if _, err := pk.TakeParked(ctx, "", "sess_nobody"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("TakeParked of an id never parked: %v, want ErrNotFound", err)
	}
}
