package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.Directory = (*Store)(nil)

// The directory's keys have no hash tag: each is read and written on its own (a pipeline of
// them is split by slot on a Redis Cluster).
func (s *Store) holderKey(id string) string  { return s.prefix + "holder:" + id }
func (s *Store) aliveKey(node string) string { return s.prefix + "alive:" + node }
func (s *Store) inbox(node string) string    { return s.prefix + "node:" + node }
func (s *Store) endedKey(id string) string   { return s.prefix + "ended:" + id }

// A holder key holds "NODE\nTENANT".

// releaseScript deletes a holder key only if it names the node.
var releaseScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. "\n" then return redis.call('DEL', KEYS[1]) end
return 0`)

// HoldSessions implements cluster.Directory.
func (s *Store) HoldSessions(ctx context.Context, node string, sessions []cluster.HeldSession, ttl time.Duration) error {
	if len(sessions) == 0 {
		return nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, h := range sessions {
			p.Set(ctx, s.holderKey(h.ID), node+"\n"+h.Tenant, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: hold sessions: %w", err)
	}
	return nil
}

// ReleaseSession implements cluster.Directory.
func (s *Store) ReleaseSession(ctx context.Context, node, id string) error {
	if err := releaseScript.Run(ctx, s.rdb, []string{s.holderKey(id)}, node).Err(); err != nil {
		return fmt.Errorf("redisstore: release session: %w", err)
	}
	return nil
}

// SessionHolder implements cluster.Directory.
func (s *Store) SessionHolder(ctx context.Context, id string) (string, string, error) {
	v, err := s.rdb.Get(ctx, s.holderKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("redisstore: session holder: %w", err)
	}
	node, tenant, _ := strings.Cut(v, "\n")
	return node, tenant, nil
}

// NodeAlive implements cluster.Directory.
func (s *Store) NodeAlive(ctx context.Context, node, url string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.aliveKey(node), "u"+url, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: node alive: %w", err)
	}
	return nil
}

// NodesAlive implements cluster.Directory.
func (s *Store) NodesAlive(ctx context.Context, nodes []string) (map[string]bool, error) {
	cmds := make([]*redis.IntCmd, len(nodes))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range nodes {
			cmds[i] = p.Exists(ctx, s.aliveKey(n))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: nodes alive: %w", err)
	}
	out := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		out[n] = cmds[i].Val() == 1
	}
	return out, nil
}

// NodeURL implements cluster.Directory.
func (s *Store) NodeURL(ctx context.Context, node string) (string, error) {
	v, err := s.rdb.Get(ctx, s.aliveKey(node)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("redisstore: node url: %w", err)
	}
	return strings.TrimPrefix(v, "u"), nil
}

// SendToNode implements cluster.Directory: SPUBLISH on the node's channel. Sharded pub/sub
// (Redis 7) keeps a channel on one shard of a Redis Cluster, so one sender's messages arrive in
// order (classic PUBLISH may enter the cluster at any node and overtake itself). SPUBLISH
// answers how many subscribers got the message: none is cluster.ErrNotListening.
func (s *Store) SendToNode(ctx context.Context, node string, msg []byte) error {
	n, err := s.rdb.SPublish(ctx, s.inbox(node), msg).Result()
	if err != nil {
		return fmt.Errorf("redisstore: send to node: %w", err)
	}
	if n == 0 {
		return cluster.ErrNotListening
	}
	return nil
}

// NodeInbox implements cluster.Directory (SSUBSCRIBE to the node's channel).
func (s *Store) NodeInbox(ctx context.Context, node string, fn func([]byte), lost func()) error {
	if err := s.subscribe(ctx, s.inbox(node), func(p string) { fn([]byte(p)) }, lost); err != nil {
		return fmt.Errorf("redisstore: node inbox: %w", err)
	}
	return nil
}

// subscribe SSUBSCRIBEs to channel and calls fn with each message's payload, one at a time,
// until ctx ends; it returns once the subscription is confirmed. go-redis connects and
// subscribes again by itself after a dropped connection, and what was published meanwhile is
// missed: lost is called when the connection fails, and again when the subscription is back
// (a confirmation after the first).
func (s *Store) subscribe(ctx context.Context, channel string, fn func(payload string), lost func()) error {
	sub := s.rdb.SSubscribe(ctx, channel)
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		_ = sub.Close()
		return err
	}
	// Receive does not see ctx end while it waits on the connection: closing the subscription
	// ends the wait, so the goroutine ends with ctx.
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	go func() {
		defer stop()
		defer sub.Close()
		down := false
		for {
			m, err := sub.Receive(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if !down {
					down = true
					lost()
				}
				select { // go-redis dials again on the next Receive
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			switch m := m.(type) {
			case *redis.Subscription: // subscribed again
				down = false
				lost()
			case *redis.Message:
				fn(m.Payload)
			}
		}
	}()
	return nil
}

// RecordEnded implements cluster.Directory.
func (s *Store) RecordEnded(ctx context.Context, id string, rec []byte, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.endedKey(id), rec, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: record an ended session: %w", err)
	}
	return nil
}

// Ended implements cluster.Directory.
func (s *Store) Ended(ctx context.Context, id string) ([]byte, error) {
	b, err := s.rdb.Get(ctx, s.endedKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: an ended session: %w", err)
	}
	return b, nil
}
