package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
	"github.com/backchannel-io/backchannel/jobs/storetest"
)

// newStore returns a Redis store with a key prefix of its own on the shared test server.
func newStore(t testing.TB, client redis.UniversalClient) jobs.Store {
	return newStoreWithPrefix(t, client, redistest.Prefix(t))
}

func newStoreWithPrefix(t testing.TB, client redis.UniversalClient, prefix string) *redisstore.Store {
	s, err := redisstore.New(redisstore.Options{Client: client, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the store conformance suite against a real Redis.
func TestConformance(t *testing.T) {
	client := redistest.New(t)
	factory := func(t testing.TB, _ jobs.Clock) jobs.Store { return newStore(t, client) }
	storetest.Run(t, factory)
	t.Run("Journal", func(t *testing.T) { storetest.RunJournal(t, factory) })
	t.Run("RenewMany", func(t *testing.T) { storetest.RunRenewMany(t, factory) })
	t.Run("FramesWithTransitions", func(t *testing.T) { storetest.RunFramesWithTransitions(t, factory) })
}

// TestMain checks that no test leaves a goroutine behind (the pipeline workers stop on Close).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformanceOnCluster runs the store conformance suite against a real three-node Redis
// Cluster (SPEC 15): every script must declare the keys it touches and find them on one slot,
// which a single server never checks, and the pipelines of concurrent sessions are split by
// node.
func TestConformanceOnCluster(t *testing.T) {
	client := redistest.NewCluster(t)
	factory := func(t testing.TB, _ jobs.Clock) jobs.Store { return newStore(t, client) }
	storetest.Run(t, factory)
	t.Run("Journal", func(t *testing.T) { storetest.RunJournal(t, factory) })
	t.Run("RenewMany", func(t *testing.T) { storetest.RunRenewMany(t, factory) })
	t.Run("FramesWithTransitions", func(t *testing.T) { storetest.RunFramesWithTransitions(t, factory) })
}

// TestClusterSpreadsTenants runs job lifecycles of tenants whose hash tags live on each of the
// three nodes of a real Redis Cluster, concurrently through one engine, so that the store's
// pipelines mix scripts for every node: every lifecycle completes, and every node holds keys.
func TestClusterSpreadsTenants(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		addrs[i] = s.Addr
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	// One tenant per node: the node serving a tenant is the one that owns its tag's slot.
	byNode := map[string]string{}
	for i := 0; len(byNode) < len(nodes) && i < 1000; i++ {
		tenant := fmt.Sprintf("tenant-%d", i)
		key := prefix + "{t:" + tenant + "}:probe"
		master, err := client.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byNode[master.Options().Addr]; !ok {
			byNode[master.Options().Addr] = tenant
		}
	}
	if len(byNode) != len(nodes) {
		t.Fatalf("found tenants for %d of %d nodes", len(byNode), len(nodes))
	}
	engine := jobs.NewEngine(newStoreWithPrefix(t, client, prefix), jobs.Options{})
	tool := jobs.Tool{Name: "render", Deferred: true, DeferredTimeout: time.Hour, Timeout: time.Minute}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, tenant := range byNode {
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sess := fmt.Sprintf("sess-%d", w)
				for i := range 20 {
					j, err := engine.Call(ctx, jobs.NewCall{Tenant: tenant, SessionID: sess, Tool: tool, Arguments: json.RawMessage(`{}`)})
					if err != nil {
						errs <- err
						return
					}
					a := jobs.Addr{Tenant: tenant, SessionID: sess, CallID: j.CallID}
					if ack, err := engine.Defer(ctx, a, fmt.Sprintf("h-%d-%d", w, i), "rendering"); err != nil || !ack.Accepted {
						errs <- fmt.Errorf("defer of %s: %+v %v", tenant, ack, err)
						return
					}
					done, err := engine.Result(ctx, jobs.Addr{Tenant: tenant, SessionID: sess, Handle: fmt.Sprintf("h-%d-%d", w, i)}, json.RawMessage(`"ok"`), "", false)
					if err != nil || done.State != jobs.Completed {
						errs <- fmt.Errorf("result of %s: %v", tenant, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		n, err := c.DBSize(ctx).Result()
		_ = c.Close()
		if err != nil || n == 0 {
			t.Errorf("node %s holds %d keys (%v), want the keys of tenant %s", s.Addr, n, err, byNode[s.Addr])
		}
	}
}

// TestRenewKeepsSettledCalls: the text agent's settled calls, kept apart from its state, live
// as long as the session's record — a lease renewal renews their ttl with the record's, so a
// session whose agent settles nothing for the journal's ttl keeps them.
func TestRenewKeepsSettledCalls(t *testing.T) {
	client := redistest.New(t)
	prefix := redistest.Prefix(t)
	s := newStoreWithPrefix(t, client, prefix)
	ctx := context.Background()
	const tenant, id = "tenant-a", "sess_settled_ttl"
	if err := s.SaveSession(ctx, "node-1", tenant, id, []byte(`{}`), nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendFrames(ctx, "node-1", tenant, id, cluster.JournalWrite{Max: 10, AgentState: []byte(`{}`),
		AgentSettled: [][]byte{[]byte(`{"call_id":"a1"}`)}}); err != nil {
		t.Fatal(err)
	}
	settled := prefix + "{t:" + tenant + "}:settled:" + id
	// Days pass with nothing settled: the list's ttl is low.
	if err := client.PExpire(ctx, settled, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewLeases(ctx, "node-1", tenant, []string{id}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := client.PTTL(ctx, settled).Val(); ttl < 24*time.Hour {
		t.Errorf("after a renewal the settled calls expire in %v, the record in %v", ttl, client.PTTL(ctx, prefix+"{t:"+tenant+"}:live:"+id).Val())
	}
}
