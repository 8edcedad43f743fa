package redisstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.ChangeRelay = (*Store)(nil)

// changesChannel is the pub/sub channel of relayed job changes (PREFIXchanges), sharded
// (SPUBLISH, Redis 7): on a Redis Cluster it lives on one shard, so changes arrive in the order
// one node published them.
func (s *Store) changesChannel() string { return s.prefix + "changes" }

// PublishChange implements cluster.ChangeRelay: the change as JSON (the job without its
// arguments, which are stored apart).
func (s *Store) PublishChange(ctx context.Context, c jobs.Change) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("redisstore: encode change: %w", err)
	}
	if err := s.rdb.SPublish(ctx, s.changesChannel(), b).Err(); err != nil {
		return fmt.Errorf("redisstore: publish change: %w", err)
	}
	return nil
}

// SubscribeChanges implements cluster.ChangeRelay. go-redis re-subscribes by itself after a
// dropped connection; changes published meanwhile are missed, and lost says so.
func (s *Store) SubscribeChanges(ctx context.Context, fn func(jobs.Change), lost func()) error {
	err := s.subscribe(ctx, s.changesChannel(), func(p string) {
		var c jobs.Change
		if json.Unmarshal([]byte(p), &c) == nil && c.Job != nil {
			fn(c)
		}
	}, lost)
	if err != nil {
		return fmt.Errorf("redisstore: subscribe to changes: %w", err)
	}
	return nil
}
