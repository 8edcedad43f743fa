package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs"
)

// TestRedisKilledMidRun kills redis-server (SIGKILL, AOF on) in the middle of a run of job
// lifecycles and restarts it: every lifecycle still completes, and no job is lost or applied
// twice.
func TestRedisKilledMidRun(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	// No retries in the client: the engine's own retry of a transition (recognised by its id when
	// it had been applied before the connection broke) is what this test exercises.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store := newStore(t, client)
	var logs countingHandler
	engine := jobs.NewEngine(store, jobs.Options{StoreRetry: 30 * time.Second, Logger: slog.New(&logs)})
	ctx := context.Background()
	const workers, perWorker = 8, 150
	tool := jobs.Tool{Name: "render", Deferred: true, DeferredTimeout: time.Hour, Timeout: time.Minute}

	var done atomic.Int64
	var mu sync.Mutex
	calls := map[string]string{} // call id → session
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := fmt.Sprintf("sess-%d", w)
			for i := range perWorker {
				j, err := engine.Call(ctx, jobs.NewCall{Tenant: "acme", SessionID: sess, Tool: tool, Arguments: json.RawMessage(`{"i":1}`)})
				if err != nil {
					errs <- fmt.Errorf("call: %w", err)
					return
				}
				mu.Lock()
				calls[j.CallID] = sess
				mu.Unlock()
				a := jobs.Addr{Tenant: "acme", SessionID: sess, CallID: j.CallID}
				ack, err := engine.Defer(ctx, a, fmt.Sprintf("h-%d-%d", w, i), "Rendering")
				if err != nil || !ack.Accepted {
					errs <- fmt.Errorf("defer: %+v %v", ack, err)
					return
				}
				if err := engine.Progress(ctx, a, "half"); err != nil {
					errs <- fmt.Errorf("progress: %w", err)
					return
				}
				if _, err := engine.Result(ctx, a, json.RawMessage(`"ok"`), "", false); err != nil {
					errs <- fmt.Errorf("result of %s: %w", j.CallID, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	// Kill the server once a third of the lifecycles are through, then bring it back.
	for done.Load() < workers*perWorker/3 {
		time.Sleep(5 * time.Millisecond)
	}
	srv.Kill()
	killedAt := done.Load()
	time.Sleep(300 * time.Millisecond)
	srv.Restart()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if done.Load() != workers*perWorker || killedAt >= workers*perWorker {
		t.Fatalf("%d lifecycles done (%d when the server was killed)", done.Load(), killedAt)
	}
	// Every job exists once, completed, with exactly one entry of each kind.
	perSession := map[string][]jobs.Entry{}
	for w := range workers {
		sess := fmt.Sprintf("sess-%d", w)
		tl, err := store.Timeline(ctx, "acme", sess, 0)
		if err != nil {
			t.Fatal(err)
		}
		perSession[sess] = tl
		if open, _ := store.OpenJobs(ctx, "acme", sess); len(open) != 0 {
			t.Fatalf("%s has open jobs after the run: %v", sess, open)
		}
	}
	if len(calls) != workers*perWorker {
		t.Fatalf("%d distinct calls, want %d", len(calls), workers*perWorker)
	}
	for id, sess := range calls {
		j, err := store.Job(ctx, "acme", id)
		if err != nil {
			t.Fatalf("job %s lost: %v", id, err)
		}
		if j.State != jobs.Completed {
			t.Fatalf("job %s is %s", id, j.State)
		}
		n := map[string]int{}
		for _, e := range perSession[sess] {
			if e.CallID == id {
				n[e.Kind]++
			}
		}
		for _, kind := range []string{jobs.KindCall, jobs.KindDeferred, jobs.KindResult} {
			if n[kind] != 1 {
				t.Fatalf("job %s has %d %s entries, want 1 (timeline %v)", id, n[kind], kind, n)
			}
		}
		if n[jobs.KindLateResultDropped] != 0 {
			t.Fatalf("job %s: its own retried result was taken for a late one", id)
		}
	}
	if logs.n.Load() == 0 {
		t.Fatalf("no transition had to be retried: the server was not killed mid-run")
	}
	t.Logf("killed after %d of %d lifecycles; %d store errors retried", killedAt, workers*perWorker, logs.n.Load())
}

// countingHandler is a slog.Handler that counts records.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestConnectionLossIsAnError checks that with the server gone an operation fails with an
// error (after the engine's retry budget) and applies nothing, and that the job is intact and
// usable once the server is back.
func TestConnectionLossIsAnError(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 100 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	store := newStore(t, client)
	engine := jobs.NewEngine(store, jobs.Options{StoreRetry: 300 * time.Millisecond})
	ctx := context.Background()
	j, err := engine.Call(ctx, jobs.NewCall{Tenant: "acme", SessionID: "s", Tool: jobs.Tool{Name: "t", Deferred: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	a := jobs.Addr{Tenant: "acme", SessionID: "s", CallID: j.CallID}
	if _, err := engine.Defer(ctx, a, "lost-conn", ""); err == nil {
		t.Fatal("defer with the server down returned no error")
	}
	srv.Restart()
	got, err := store.Job(ctx, "acme", j.CallID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != jobs.Pending || got.Version != 1 {
		t.Fatalf("after a failed defer: %+v", got)
	}
	if ack, err := engine.Defer(ctx, a, "lost-conn", ""); err != nil || !ack.Accepted {
		t.Fatalf("defer after the restart: %+v %v", ack, err)
	}
}

// TestKeysShareTheTenantHashTag runs a workload and checks that every key the store wrote
// carries its tenant's hash tag as the first braces of the key.
func TestKeysShareTheTenantHashTag(t *testing.T) {
	client := redistest.New(t)
	prefix := redistest.Prefix(t)
	store := newStoreWithPrefix(t, client, prefix)
	engine := jobs.NewEngine(store, jobs.Options{})
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		p, err := engine.Call(ctx, jobs.NewCall{Tenant: tenant, SessionID: "s", Tool: jobs.Tool{Name: "t", Deferred: true}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Call(ctx, jobs.NewCall{Tenant: tenant, SessionID: "s", Tool: jobs.Tool{Name: "t"}, ParentCallID: p.CallID}); err != nil {
			t.Fatal(err)
		}
		a := jobs.Addr{Tenant: tenant, SessionID: "s", CallID: p.CallID}
		if _, err := engine.Defer(ctx, a, "tag-h", ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := engine.Cancel(ctx, a, "agent_request"); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 8 {
		t.Fatalf("only %d keys written: %v", len(keys), keys)
	}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		if !strings.HasPrefix(rest, "{t:acme}:") && !strings.HasPrefix(rest, "{t:globex}:") {
			t.Fatalf("key %q does not start with its tenant's hash tag", k)
		}
	}
}

// TestInboxHearsItLostMessages restarts redis-server under a node's inbox and the change
// subscription (SPEC 15: pub/sub loses what is published while a subscriber is away): each
// says so — lost is called when the connection fails and again once it listens again — and
// messages sent after that arrive. A send to an inbox nobody listens to is ErrNotListening.
func TestInboxHearsItLostMessages(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	s := newStoreWithPrefix(t, client, redistest.Prefix(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 16)
	inboxLost, changesLost := make(chan struct{}, 16), make(chan struct{}, 16)
	if err := s.NodeInbox(ctx, "node-a", func(m []byte) { got <- string(m) }, func() { inboxLost <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := s.SubscribeChanges(ctx, func(jobs.Change) {}, func() { changesLost <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	for name, ch := range map[string]chan struct{}{"inbox": inboxLost, "changes": changesLost} {
		for i := range 2 { // the failure, then listening again
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("the %s subscription across a Redis restart: lost called %d times, want 2 (failed, listening again)", name, i)
			}
		}
	}
	if err := s.SendToNode(ctx, "node-a", []byte("after")); err != nil {
		t.Fatalf("SendToNode once the inbox listens again: %v", err)
	}
	select {
	case m := <-got:
		if m != "after" {
			t.Errorf("the inbox got %q, want after", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the inbox got nothing after the restart")
	}
	if err := s.SendToNode(ctx, "node-b", []byte("x")); !errors.Is(err, cluster.ErrNotListening) {
		t.Errorf("SendToNode to a node that does not listen: %v, want ErrNotListening", err)
	}
}
