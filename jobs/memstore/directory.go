package memstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

var _ jobs.NodeDirectory = (*Store)(nil)

// directory is the memory store's jobs.NodeDirectory, for nodes in one process.
type directory struct {
	mu      sync.Mutex
	holders map[string]lease // session id → holder
	alive   map[string]time.Time
	inboxes map[string][]chan []byte
}

type lease struct {
	node    string
	expires time.Time
}

func (d *directory) init() {
	if d.holders == nil {
		d.holders = make(map[string]lease)
		d.alive = make(map[string]time.Time)
		d.inboxes = make(map[string][]chan []byte)
	}
}

// HoldSessions implements jobs.NodeDirectory.
func (s *Store) HoldSessions(ctx context.Context, node string, ids []string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	exp := time.Now().Add(ttl)
	for _, id := range ids {
		d.holders[id] = lease{node: node, expires: exp}
	}
	return nil
}

// ReleaseSession implements jobs.NodeDirectory.
func (s *Store) ReleaseSession(ctx context.Context, node, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	if d.holders[id].node == node {
		delete(d.holders, id)
	}
	return nil
}

// SessionHolder implements jobs.NodeDirectory.
func (s *Store) SessionHolder(ctx context.Context, id string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	l, ok := d.holders[id]
	if !ok || !time.Now().Before(l.expires) {
		return "", nil
	}
	return l.node, nil
}

// NodeAlive implements jobs.NodeDirectory.
func (s *Store) NodeAlive(ctx context.Context, node string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	d.alive[node] = time.Now().Add(ttl)
	return nil
}

// NodesAlive implements jobs.NodeDirectory.
func (s *Store) NodesAlive(ctx context.Context, nodes []string) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	out := make(map[string]bool, len(nodes))
	now := time.Now()
	for _, n := range nodes {
		out[n] = now.Before(d.alive[n])
	}
	return out, nil
}

// SendToNode implements jobs.NodeDirectory. An inbox 4096 messages behind misses the message.
func (s *Store) SendToNode(ctx context.Context, node string, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	for _, ch := range d.inboxes[node] {
		select {
		case ch <- slices.Clone(msg):
		default:
		}
	}
	return nil
}

// NodeInbox implements jobs.NodeDirectory.
func (s *Store) NodeInbox(ctx context.Context, node string, fn func([]byte)) error {
	ch := make(chan []byte, 4096)
	d := &s.dir
	d.mu.Lock()
	d.init()
	d.inboxes[node] = append(d.inboxes[node], ch)
	d.mu.Unlock()
	go func() {
		defer func() {
			d.mu.Lock()
			d.inboxes[node] = slices.DeleteFunc(d.inboxes[node], func(c chan []byte) bool { return c == ch })
			d.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-ch:
				fn(m)
			}
		}
	}()
	return nil
}
