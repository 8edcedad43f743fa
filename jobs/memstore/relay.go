package memstore

import (
	"context"
	"sync"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.ChangeRelay = (*Store)(nil)

// relay fans published changes out to the subscribers of one Store (nodes in one process).
type relay struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch   chan jobs.Change
	lost chan struct{} // a change was missed
}

// PublishChange implements cluster.ChangeRelay. A subscriber that is 1024 changes behind misses
// the change, and hears that it lost one (delivery is at most once, as with Redis pub/sub).
func (s *Store) PublishChange(ctx context.Context, c jobs.Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.Job != nil {
		c.Job = c.Job.Clone()
	}
	s.relay.mu.Lock()
	defer s.relay.mu.Unlock()
	for sub := range s.relay.subs {
		select {
		case sub.ch <- c:
		default:
			select {
			case sub.lost <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// SubscribeChanges implements cluster.ChangeRelay.
func (s *Store) SubscribeChanges(ctx context.Context, fn func(jobs.Change), lost func()) error {
	sub := &subscriber{ch: make(chan jobs.Change, 1024), lost: make(chan struct{}, 1)}
	s.relay.mu.Lock()
	if s.relay.subs == nil {
		s.relay.subs = make(map[*subscriber]struct{})
	}
	s.relay.subs[sub] = struct{}{}
	s.relay.mu.Unlock()
	go func() {
		defer func() {
			s.relay.mu.Lock()
			delete(s.relay.subs, sub)
			s.relay.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-sub.ch:
				fn(c)
			case <-sub.lost:
				lost()
			}
		}
	}()
	return nil
}
