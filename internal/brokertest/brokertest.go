// Package brokertest runs a real broker for tests: a broker.Node with the WebSocket transport
// behind an HTTP server on a free loopback port, over the memory store or a private Redis. Tests
// talk to it only over the network, like any client.
package brokertest

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/ws"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs/memstore"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// Tenants and keys every test broker knows.
const (
	KeyA    = "key-a"
	TenantA = "tenant-a"
	KeyB    = "key-b"
	TenantB = "tenant-b"
)

// Stores are the store kinds a test runs against.
var Stores = []string{"memory", "redis"}

// Options configure Start.
type Options struct {
	// Store is "memory" (default) or "redis" (a private redis-server, or
	// BACKCHANNEL_TEST_REDIS_URL with a key prefix of the test's own).
	Store string
	// Redis is the client to use with Store "redis" (nil: a private server for the test).
	Redis *redis.Client
	// Prefix is the Redis key prefix (empty: one of the test's own). Two brokers given the same
	// client and prefix are two nodes sharing one store.
	Prefix string
	// Config is the broker configuration; APIKeys default to KeyA/KeyB, ResumeWindow to 3 s
	// and BackgroundAfter to 1 s.
	Config broker.Config
	// HTTP are the HTTP server's limits (zero: those of `backchannel serve`, SPEC 18).
	HTTP broker.HTTPLimits
	// WS are the options of the WebSocket transport (zero: those of `backchannel serve`).
	WS ws.Options
	// Routes, when set, adds routes to the node's handler as `backchannel serve` adds /mcp,
	// the WebRTC signaling and the pages (Node.Handler's extra).
	Routes func(n *broker.Node, mux *http.ServeMux)
}

// SharedRedis returns the Options of a node on a private Redis (one client, one key prefix) for
// the test: every broker started with them is one more node sharing that store.
func SharedRedis(t testing.TB) Options {
	t.Helper()
	return Options{Store: "redis", Redis: redistest.New(t), Prefix: redistest.Prefix(t)}
}

// Broker is a running test broker.
type Broker struct {
	URL   string // http://127.0.0.1:PORT
	WSURL string // ws://127.0.0.1:PORT/v1/ws
	Addr  string
	Node  *broker.Node
	Store cluster.Store
	srv   *http.Server
	wsh   *ws.Handler
	stop  context.CancelFunc
	done  chan struct{}
	dead  bool
}

// Start starts a broker for the test; it is shut down (memory: sessions ended) when the test
// ends.
func Start(t testing.TB, opts Options) *Broker {
	t.Helper()
	cfg := opts.Config
	if cfg.APIKeys == nil {
		cfg.APIKeys = map[string]string{KeyA: TenantA, KeyB: TenantB}
	}
	if cfg.ResumeWindow == 0 {
		cfg.ResumeWindow = 3 * time.Second
	}
	if cfg.BackgroundAfter == 0 {
		cfg.BackgroundAfter = time.Second
	}
	b := &Broker{done: make(chan struct{})}
	switch opts.Store {
	case "", "memory":
		b.Store = memstore.New(nil)
	case "redis":
		client := opts.Redis
		if client == nil {
			client = redistest.New(t)
		}
		prefix := opts.Prefix
		if prefix == "" {
			prefix = redistest.Prefix(t)
		}
		rs, err := redisstore.New(redisstore.Options{Client: client, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rs.Close() })
		b.Store = rs
	default:
		t.Fatalf("brokertest: unknown store %q", opts.Store)
	}
	b.Node = broker.NewNode(cfg, b.Store)
	b.wsh = ws.NewHandler(b.Node, opts.WS)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.Addr = ln.Addr().String()
	b.URL = "http://" + b.Addr
	b.WSURL = "ws://" + b.Addr + "/v1/ws"
	b.Node.Advertise(b.URL)
	var extra func(mux *http.ServeMux)
	if opts.Routes != nil {
		extra = func(mux *http.ServeMux) { opts.Routes(b.Node, mux) }
	}
	// The handler and the server are built as `backchannel serve` builds them.
	b.srv = broker.NewHTTPServer(b.Node.Handler(b.wsh, extra), opts.HTTP)
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	go func() {
		defer close(b.done)
		_ = b.Node.Run(ctx)
	}()
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { b.Close(opts.Store != "redis") })
	return b
}

// WaitRelaying waits until the node listens for what other nodes relay to it (job changes,
// connections): before that, what another node relays is lost.
func (b *Broker) WaitRelaying(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.Node.Relaying() {
		if time.Now().After(deadline) {
			t.Fatal("brokertest: the node never listened for what other nodes relay")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Freeze stops the node's background work — deadline polling, the renewal of its sessions and
// liveness in the shared store, its inbox (whose subscription closes, so other nodes find it
// not listening at once) — as a crashed node would, without a shutdown: the other nodes take
// its sessions over once its Config.HoldTTL has passed.
func (b *Broker) Freeze() {
	b.stop()
	<-b.done
}

// Kill stops the broker as a killed process would stop: its listener closes, its connections
// drop without a close frame, and the node does nothing more (broker.Node.Halt) — nothing is
// parked or released. To the other nodes it is dead once its Config.HoldTTL has passed.
func (b *Broker) Kill() {
	b.dead = true
	b.Node.Halt()
	_ = b.srv.Close()
	b.wsh.AbortAll()
	b.stop()
	<-b.done
}

// Close shuts the broker down: end ends every session first (the memory store's shutdown);
// otherwise connections are closed with 1012. A killed broker is not shut down again.
func (b *Broker) Close(end bool) {
	if b.dead {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Node.Shutdown(ctx, end)
	b.wsh.CloseAll(broker.StatusServiceRestart, "service restart")
	_ = b.srv.Shutdown(ctx)
	_ = b.wsh.Wait(ctx)
	b.stop()
	<-b.done
}
