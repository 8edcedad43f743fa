package memstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

var _ cluster.Directory = (*Store)(nil)

// directory is the memory store's cluster.Directory, for nodes in one process.
type directory struct {
	mu      sync.Mutex
	holders map[string]lease // session id → holder
	alive   map[string]aliveRec
	inboxes map[string][]*inbox
	ended   map[string]endedRec
}

type endedRec struct {
	rec     []byte
	expires time.Time
}

type aliveRec struct {
	url     string
	expires time.Time
}

type lease struct {
	node    string
	tenant  string
	expires time.Time
}

// lockDir returns the directory, locked (the caller unlocks it), unless ctx ended.
func (s *Store) lockDir(ctx context.Context) (*directory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := &s.dir
	d.mu.Lock()
	d.init()
	return d, nil
}

func (d *directory) init() {
	if d.holders == nil {
		d.holders = make(map[string]lease)
		d.alive = make(map[string]aliveRec)
		d.inboxes = make(map[string][]*inbox)
		d.ended = make(map[string]endedRec)
	}
}

// HoldSessions implements cluster.Directory.
func (s *Store) HoldSessions(ctx context.Context, node string, sessions []cluster.HeldSession, ttl time.Duration) error {
	d, err := s.lockDir(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	exp := time.Now().Add(ttl)
	for _, h := range sessions {
		d.holders[h.ID] = lease{node: node, tenant: h.Tenant, expires: exp}
	}
	return nil
}

// ReleaseSession implements cluster.Directory.
func (s *Store) ReleaseSession(ctx context.Context, node, id string) error {
	d, err := s.lockDir(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if d.holders[id].node == node {
		delete(d.holders, id)
	}
	return nil
}

// SessionHolder implements cluster.Directory.
func (s *Store) SessionHolder(ctx context.Context, id string) (string, string, error) {
	d, err := s.lockDir(ctx)
	if err != nil {
		return "", "", err
	}
	defer d.mu.Unlock()
	l, ok := d.holders[id]
	if !ok || !time.Now().Before(l.expires) {
		return "", "", nil
	}
	return l.node, l.tenant, nil
}

// NodeAlive implements cluster.Directory.
func (s *Store) NodeAlive(ctx context.Context, node, url string, ttl time.Duration) error {
	d, err := s.lockDir(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	d.alive[node] = aliveRec{url: url, expires: time.Now().Add(ttl)}
	return nil
}

// NodesAlive implements cluster.Directory.
func (s *Store) NodesAlive(ctx context.Context, nodes []string) (map[string]bool, error) {
	d, err := s.lockDir(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	out := make(map[string]bool, len(nodes))
	now := time.Now()
	for _, n := range nodes {
		out[n] = now.Before(d.alive[n].expires)
	}
	return out, nil
}

// NodeURL implements cluster.Directory.
func (s *Store) NodeURL(ctx context.Context, node string) (string, error) {
	d, err := s.lockDir(ctx)
	if err != nil {
		return "", err
	}
	defer d.mu.Unlock()
	a := d.alive[node]
	if !time.Now().Before(a.expires) {
		return "", nil
	}
	return a.url, nil
}

// SendToNode implements cluster.Directory. An inbox 4096 messages behind misses the message
// (and its node hears it lost one).
func (s *Store) SendToNode(ctx context.Context, node string, msg []byte) error {
	d, err := s.lockDir(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if len(d.inboxes[node]) == 0 {
		return cluster.ErrNotListening
	}
	for _, in := range d.inboxes[node] {
		select {
		case in.ch <- slices.Clone(msg):
		default:
			select {
			case in.lost <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// inbox is one NodeInbox listener.
type inbox struct {
	ch   chan []byte
	lost chan struct{} // a message was missed
}

// NodeInbox implements cluster.Directory.
func (s *Store) NodeInbox(ctx context.Context, node string, fn func([]byte), lost func()) error {
	in := &inbox{ch: make(chan []byte, 4096), lost: make(chan struct{}, 1)}
	d := &s.dir
	d.mu.Lock()
	d.init()
	d.inboxes[node] = append(d.inboxes[node], in)
	d.mu.Unlock()
	go func() {
		defer func() {
			d.mu.Lock()
			d.inboxes[node] = slices.DeleteFunc(d.inboxes[node], func(c *inbox) bool { return c == in })
			d.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-in.ch:
				fn(m)
			case <-in.lost:
				lost()
			}
		}
	}()
	return nil
}

// RecordEnded implements cluster.Directory.
func (s *Store) RecordEnded(ctx context.Context, id string, rec []byte, ttl time.Duration) error {
	d, err := s.lockDir(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	now := time.Now()
	for k, r := range d.ended {
		if !now.Before(r.expires) {
			delete(d.ended, k)
		}
	}
	d.ended[id] = endedRec{rec: slices.Clone(rec), expires: now.Add(ttl)}
	return nil
}

// Ended implements cluster.Directory.
func (s *Store) Ended(ctx context.Context, id string) ([]byte, error) {
	d, err := s.lockDir(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	r, ok := d.ended[id]
	if !ok || !time.Now().Before(r.expires) {
		return nil, jobs.ErrNotFound
	}
	return slices.Clone(r.rec), nil
}
