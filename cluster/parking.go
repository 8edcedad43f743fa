package cluster

import (
	"context"
	"time"
)

// ParkedSession is a session that no broker node serves at the moment: its node shut down with
// a shared store (SPEC 18: close 1012, the session lives on), and the next node that hears of
// it — a resuming hello, its timeline, or the end of its resume window — takes it back
// (SPEC 10: resume works on any node; SPEC 15).
type ParkedSession struct {
	Tenant    string
	SessionID string
	// ExpiresMS is when its resume window ends (epoch ms): a session nobody took back by then
	// ends with resume_expired, by whichever node finds it due.
	ExpiresMS int64
	// State is the broker's encoding of the session (slots, outboxes, token hashes).
	State []byte
}

// Parking keeps the cluster's parked sessions: a session parked by one node is taken back,
// exactly once, by any of them.
type Parking interface {
	// ParkSession keeps p until it is taken, or for retention after its ExpiresMS.
	ParkSession(ctx context.Context, p ParkedSession, retention time.Duration) error
	// TakeParked removes the parked session and returns it, or jobs.ErrNotFound. Of concurrent
	// callers exactly one gets it. tenant is "" when the caller does not know it (a resume
	// token names no tenant).
	TakeParked(ctx context.Context, tenant, sessionID string) (*ParkedSession, error)
	// DueParked lists the ids of the tenant's parked sessions whose ExpiresMS is at or before
	// now, oldest first.
	DueParked(ctx context.Context, tenant string, now time.Time) ([]string, error)
}
