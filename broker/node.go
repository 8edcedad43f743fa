package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/broker/relay"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs"
)

// Node is one broker process: it owns the live parts of its sessions (slots, outboxes,
// connections, text-agent state) and runs jobs through a jobs.Engine over a store that is also
// its cluster (a node alone is a cluster of one).
type Node struct {
	cfg    Config
	log    *slog.Logger
	store  cluster.Store
	engine *jobs.Engine
	ctx    context.Context
	cancel context.CancelFunc
	// now tells the time of the node's sweeps (sweepOverdue) and its journal's health
	// (journalhealth.go); time.Now but in tests.
	now func() time.Time
	// journalFailingSince is when the journal writes started failing (unix ms; 0: the last
	// one succeeded).
	journalFailingSince atomic.Int64

	takeMu   sync.Mutex // serializes taking back parked sessions (park.go)
	mu       sync.Mutex
	sessions map[string]*Session // live sessions by id
	// perTenant counts the live sessions of each tenant on this node (--max-sessions-per-tenant).
	perTenant map[string]int
	followers followerCounts // the ?follow=1 streams served, by session (followers.go)
	ended     map[string]*endedSession
	closing   bool
	metrics   *metrics
	relaying  atomic.Bool // subscribed to the changes other nodes relay

	// The cluster (the store's): its directory, journal, parking and change relay.
	addr    string            // this node's address among the nodes: NodeID plus a random suffix
	dir     cluster.Directory // holders, live nodes, inboxes (holding.go, package relay)
	journal cluster.Journal   // the sessions' journal (journal.go; held.go says when it is written)
	parking cluster.Parking   // parked sessions (park.go)
	changes cluster.ChangeRelay
	// relay carries the connections relayed between this node and others (package relay).
	relay   *relay.Relay
	inboxUp atomic.Bool   // the node's inbox listens
	url     advertisedURL // where other nodes reach this node's HTTP server (forward.go)
}

// endedSession is what a node remembers of an ended session for the retention period: enough
// to answer a late hello (session_ended / resume_expired) and its timeline's owner.
type endedSession struct {
	tenant       string
	joinHash     [32]byte
	callerHash   [32]byte
	expiredSlots map[string]bool
	at           time.Time
}

// NewNode returns a node over store, which is also the node's cluster. Run must be called to
// fire job deadlines.
func NewNode(cfg Config, store cluster.Store) *Node {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		now:       time.Now,
		cfg:       cfg,
		log:       cfg.Logger,
		store:     store,
		ctx:       ctx,
		cancel:    cancel,
		sessions:  make(map[string]*Session),
		perTenant: make(map[string]int),
		ended:     make(map[string]*endedSession),
		metrics:   newMetrics(),
	}
	n.addr = cfg.NodeID + "." + randomID(8)
	n.dir, n.journal, n.parking, n.changes = store, store, store, store
	n.relay = relay.New(ctx, relay.Config{Addr: n.addr, Directory: store, Node: relayHost{n},
		SendQueueBytes: cfg.Limits.SendQueueBytes, Log: cfg.Logger})
	n.engine = jobs.NewEngine(store, engineOptions(&n.cfg, n.onChange))
	return n
}

// Engine returns the node's job engine.
func (n *Node) Engine() *jobs.Engine { return n.engine }

// Config returns the node's configuration with defaults applied.
func (n *Node) Config() Config { return n.cfg }

// Run fires job deadlines and runs the node's background loops — forgetting ended sessions
// after the retention period, relaying, holding and renewing sessions, sweeping parked and
// overdue work — until ctx ends or the node shuts down (Shutdown, Halt). It returns once every
// loop it started has returned.
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loop := func(fn func(context.Context)) {
		loops.Add(1)
		go func() { defer loops.Done(); fn(ctx) }()
	}
	defer func() { cancel(); loops.Wait() }()
	loop(func(ctx context.Context) {
		select {
		case <-n.ctx.Done():
			cancel()
		case <-ctx.Done():
		}
	})
	loop(n.sweepEnded)
	loop(n.subscribeChanges)
	loop(func(ctx context.Context) { every(ctx, overdueSweep, n.sweepOverdueAll) })
	loop(n.listen)
	loop(n.holdEvery)
	loop(func(ctx context.Context) { every(ctx, relay.CheckEvery, n.relay.Ping) })
	loop(func(ctx context.Context) { every(ctx, parkedSweep, func() { n.sweepParked(); n.sweepOrphans() }) })
	err := n.engine.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (n *Node) sweepEnded(ctx context.Context) {
	every(ctx, time.Minute, func() {
		now := time.Now()
		n.mu.Lock()
		for id, e := range n.ended {
			if now.Sub(e.at) > n.engine.Retention() {
				delete(n.ended, id)
			}
		}
		n.mu.Unlock()
	})
}

// tenantOf authenticates an API key (constant time per key).
func (n *Node) tenantOf(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	var tenant string
	found := 0
	for k, t := range n.cfg.APIKeys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			tenant = t
			found = 1
		}
	}
	return tenant, found == 1
}

// Tenant authenticates an API key and returns its tenant.
func (n *Node) Tenant(key string) (string, bool) { return n.tenantOf(key) }

// session returns the live session with id, or nil.
func (n *Node) session(id string) *Session {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sessions[id]
}

// endedInfo returns what is remembered of an ended session, or nil: by this node, or by the
// node of the cluster that ended it.
func (n *Node) endedInfo(id string) *endedSession {
	n.mu.Lock()
	e := n.ended[id]
	n.mu.Unlock()
	if e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(n.ctx, relayTimeout)
	defer cancel()
	b, err := n.dir.Ended(ctx, id)
	if err != nil {
		if !errors.Is(err, jobs.ErrNotFound) {
			n.log.Warn("broker: looking up an ended session", "session", id, "err", err)
		}
		return nil
	}
	var rec endedRecord
	if json.Unmarshal(b, &rec) != nil {
		return nil
	}
	e = &endedSession{tenant: rec.Tenant, expiredSlots: make(map[string]bool, len(rec.Expired)), at: time.UnixMilli(rec.AtMS)}
	copy(e.joinHash[:], rec.JoinHash)
	copy(e.callerHash[:], rec.CallerHash)
	for _, s := range rec.Expired {
		e.expiredSlots[s] = true
	}
	n.mu.Lock()
	n.ended[id] = e
	n.mu.Unlock()
	return e
}

// endedRecord is an endedSession in the shared store.
type endedRecord struct {
	Tenant   string `json:"tenant"`
	JoinHash []byte `json:"join_hash"`
	// CallerHash is the caller token's hash (absent in records written before caller tokens).
	CallerHash []byte   `json:"caller_hash,omitempty"`
	Expired    []string `json:"expired,omitempty"`
	AtMS       int64    `json:"at_ms"`
}

// recordEnded tells the nodes of the cluster that session id ended, for the retention period.
func (n *Node) recordEnded(id string, e *endedSession) {
	rec := endedRecord{Tenant: e.tenant, JoinHash: e.joinHash[:], CallerHash: e.callerHash[:], AtMS: e.at.UnixMilli()}
	for s := range e.expiredSlots {
		rec.Expired = append(rec.Expired, s)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, relayTimeout)
	defer cancel()
	if err := n.dir.RecordEnded(ctx, id, b, n.engine.Retention()); err != nil {
		n.log.Warn("broker: recording an ended session for the other nodes", "session", id, "err", err)
	}
}

// CreateSession creates a session of tenant (POST /v1/sessions, or a hello with only an API
// key) with the model it names (empty: the server's default).
func (n *Node) CreateSession(tenant string, mc ModelConfig) (*Session, error) {
	s, err := n.newLiveSession(tenant, mc)
	if err != nil {
		return nil, err
	}
	n.hold(s) // the store's round trip, outside the node's lock; before anyone learns the id
	return s, nil
}

// newLiveSession makes and registers a new session, under the node's lock.
func (n *Node) newLiveSession(tenant string, mc ModelConfig) (*Session, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return nil, errShuttingDown
	}
	if n.perTenant[tenant] >= n.cfg.Limits.MaxSessionsPerTenant {
		return nil, ErrTooManySessions
	}
	s := newSession(n, tenant)
	s.modelCfg = mc
	n.addSessionLocked(s)
	s.start()
	return s, nil
}

var errShuttingDown = errors.New("broker: shutting down")

// ErrTooManySessions is CreateSession's answer when the tenant has --max-sessions-per-tenant
// open sessions on this node (SPEC 18: limit_exceeded, HTTP 429).
var ErrTooManySessions = errors.New("broker: the tenant has the most open sessions allowed")

// addSessionLocked makes s one of the node's live sessions (n.mu held).
func (n *Node) addSessionLocked(s *Session) {
	n.sessions[s.id] = s
	n.perTenant[s.tenant]++
	s.counted = true
	n.metrics.sessions.Inc()
}

// uncountLocked takes s out of its tenant's count of open sessions, once (n.mu held).
func (n *Node) uncountLocked(s *Session) {
	if !s.counted {
		return
	}
	s.counted = false
	if n.perTenant[s.tenant]--; n.perTenant[s.tenant] <= 0 {
		delete(n.perTenant, s.tenant)
	}
}

// ending takes a session that is ending out of its tenant's count before its connections hear
// of the end, so that a new session fits as soon as they do.
func (n *Node) ending(s *Session) {
	n.mu.Lock()
	n.uncountLocked(s)
	n.mu.Unlock()
}

// dropSessionLocked makes s no longer one of the node's live sessions, if it was (n.mu held).
func (n *Node) dropSessionLocked(s *Session) {
	if n.sessions[s.id] != s {
		return
	}
	delete(n.sessions, s.id)
	n.uncountLocked(s)
	n.metrics.sessions.Dec()
}

// forget moves an ended session to the ended list.
func (n *Node) forget(s *Session, info *endedSession) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropSessionLocked(s)
	n.ended[s.id] = info
	n.release(s.id)
}

// onChange routes a job change to its session's mailbox, or, for a session this node does not
// hold, to the node that does (SPEC 15: relayed through the store, see relayed).
func (n *Node) onChange(c jobs.Change) {
	if c.Job == nil {
		return
	}
	if n.deliver(c) {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	if err := n.changes.PublishChange(ctx, c); err != nil {
		n.log.Warn("broker: relaying a job change to another node; trying again", "call_id", c.Job.CallID, "event", c.Event, "err", err)
		go n.republish(c)
	}
}

// republish tries again, with backoff for up to 10 s, to relay a change the store refused (a
// Redis restart); the session's node also finds an ended job's end by itself once it is
// overdue (sweepOverdue), or when its subscription dropped (reconcile).
func (n *Node) republish(c jobs.Change) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxElapsedTime = 100*time.Millisecond, 10*time.Second
	err := backoff.Retry(func() error {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
		defer cancel()
		return n.changes.PublishChange(ctx, c)
	}, backoff.WithContext(b, n.ctx))
	if err != nil && n.ctx.Err() == nil {
		n.log.Warn("broker: a job change was not relayed to another node", "call_id", c.Job.CallID, "event", c.Event, "err", err)
	}
}

// deliver posts a change to its session's mailbox if this node holds the session.
func (n *Node) deliver(c jobs.Change) bool {
	s := n.session(c.Job.SessionID)
	if s == nil || s.tenant != c.Job.Tenant {
		return false
	}
	s.mb.post(func() { s.handleChange(c) }, true)
	return true
}

// subscribeChanges subscribes to the changes other nodes relay, trying again every second
// while the store cannot be reached (go-redis keeps a subscription in place by itself).
func (n *Node) subscribeChanges(ctx context.Context) {
	n.untilDone(ctx, "subscribing to the job changes of other nodes", func() error {
		return n.changes.SubscribeChanges(ctx, n.relayed, n.reconcileAll)
	}, &n.relaying)
}

// untilDone runs fn every second until it succeeds (then sets done) or ctx ends.
func (n *Node) untilDone(ctx context.Context, what string, fn func() error, done *atomic.Bool) {
	for {
		err := fn()
		if err == nil {
			done.Store(true)
			return
		}
		n.log.Warn("broker: "+what, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Relaying reports whether the node receives the job changes and the relayed connections of
// other nodes (SPEC 15).
func (n *Node) Relaying() bool { return n.relaying.Load() && n.inboxUp.Load() }

// relayed takes a change another node relayed: the session's node handles it; every other node
// (the sender among them) drops it.
func (n *Node) relayed(c jobs.Change) { n.deliver(c) }

// Shutdown stops the node. With end set (the memory store) it ends every session first
// (SPEC 3.6: reason ended); otherwise it parks every session for another node of the cluster
// (park.go: its connections are closed with 1012, it and its jobs live on). It returns when every session has been handled or
// ctx ends.
func (n *Node) Shutdown(ctx context.Context, end bool) error {
	n.mu.Lock()
	n.closing = true
	live := make([]*Session, 0, len(n.sessions))
	for _, s := range n.sessions {
		live = append(live, s)
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		wg.Add(1)
		done := func() { wg.Done() }
		if end {
			if !s.mb.post(func() { s.end(endEnded); done() }, false) {
				done()
			}
		} else if !s.mb.post(func() { s.park(); done() }, false) {
			done()
		}
	}
	n.relay.CloseEdges()
	finished := make(chan struct{})
	go func() { wg.Wait(); n.relay.Wait(); close(finished) }()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = ctx.Err()
	}
	n.cancel()
	return err
}

// Halt stops the node at once, as a crash would (for fault tests and drills): nothing is parked,
// ended or released, and from now on every store operation of the node fails. Its sessions are
// taken over by other nodes once its leases run out (journal.go).
func (n *Node) Halt() {
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()
	n.cancel()
}

// randomToken returns n random bytes as base64url without padding.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hashToken is how resume tokens are stored (SPEC 10: only as a hash).
func hashToken(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// randomID returns n random characters of a-z0-9.
func randomID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
