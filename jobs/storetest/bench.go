package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

// Parallelism is how many goroutines per CPU the benchmarks run: many concurrent sessions, as
// on a busy node (the Redis store pipelines their scripts together).
const Parallelism = 64

// BenchmarkTransitions measures job state transitions per second: concurrent sessions each
// report progress on their own pending job (every report is one transition that re-arms the
// ordinary timeout). The metric transitions/s is reported.
func BenchmarkTransitions(b *testing.B, newStore Factory) {
	store := newStore(b, jobs.SystemClock{})
	engine := jobs.NewEngine(store, jobs.Options{})
	ctx := context.Background()
	tool := jobs.Tool{Name: "bench", Timeout: 120 * time.Second}
	var worker atomic.Int64
	b.SetParallelism(Parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		sess := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), worker.Add(1))
		j, err := engine.Call(ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: tool})
		if err != nil {
			b.Error(err)
			return
		}
		a := jobs.Addr{Tenant: tenantA, SessionID: sess, CallID: j.CallID}
		for pb.Next() {
			if err := engine.Progress(ctx, a, "step"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "transitions/s")
}

// LifecycleTransitions is the number of transitions in one lifecycle of BenchmarkLifecycle.
const LifecycleTransitions = 6

// BenchmarkLifecycle measures whole job lifecycles per second: call → defer → 3 progress →
// result, from concurrent sessions. The metric lifecycles/s is reported.
func BenchmarkLifecycle(b *testing.B, newStore Factory) {
	store := newStore(b, jobs.SystemClock{})
	engine := jobs.NewEngine(store, jobs.Options{})
	ctx := context.Background()
	tool := jobs.Tool{Name: "bench", Deferred: true, DeferredTimeout: time.Hour}
	args := json.RawMessage(`{"q":"status report","n":3}`)
	out := json.RawMessage(`{"url":"https://example.com/r/1"}`)
	var worker atomic.Int64
	b.SetParallelism(Parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		sess := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), w)
		for i := 0; pb.Next(); i++ {
			if err := Lifecycle(ctx, engine, tenantA, sess, tool, args, out, fmt.Sprintf("%s-h%d", sess, i)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lifecycles/s")
}

// Lifecycle runs one call → defer → 3 progress → result through engine.
func Lifecycle(ctx context.Context, engine *jobs.Engine, tenant, sess string, tool jobs.Tool, args, out json.RawMessage, handle string) error {
	j, err := engine.Call(ctx, jobs.NewCall{Tenant: tenant, SessionID: sess, Tool: tool, Arguments: args})
	if err != nil {
		return err
	}
	a := jobs.Addr{Tenant: tenant, SessionID: sess, CallID: j.CallID}
	ack, err := engine.Defer(ctx, a, handle, "Working")
	if err != nil {
		return err
	}
	if !ack.Accepted {
		return fmt.Errorf("defer rejected: %s", ack.Reason)
	}
	for range 3 {
		if err := engine.Progress(ctx, a, "step"); err != nil {
			return err
		}
	}
	_, err = engine.Result(ctx, a, out, "", false)
	return err
}

// DeadlineJobs is how many open deferred jobs BenchmarkDeadlines keeps pending at once.
const DeadlineJobs = 100_000

// BenchmarkDeadlines measures how late deadlines fire with DeadlineJobs open deferred jobs
// pending: it defers them all with deferred clocks that run out 12–22 s after their defer
// (spread over ten seconds: 10,000 deadlines/s), lets Engine.Run fire them on the real clock,
// and reports how long
// after its deadline each timeout was applied (late-p50-ms, late-p99-ms, late-max-ms).
func BenchmarkDeadlines(b *testing.B, newStore Factory) {
	for range b.N {
		store := newStore(b, jobs.SystemClock{})
		late := make([]int64, 0, DeadlineJobs)
		var mu sync.Mutex
		all := make(chan struct{})
		engine := jobs.NewEngine(store, jobs.Options{OnChange: func(c jobs.Change) {
			if c.Event != jobs.EventTimedOut {
				return
			}
			d := time.Now().UnixMilli() - c.Job.DeferredDLMS
			mu.Lock()
			late = append(late, d)
			if len(late) == DeadlineJobs {
				close(all)
			}
			mu.Unlock()
		}})
		ctx, stopRun := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			_ = engine.Run(ctx)
		}()
		// cancel stops the scheduler and waits for it, so that nothing of it outlives the
		// iteration (or the store, which the test closes at its end).
		cancel := func() {
			stopRun()
			<-ran
		}
		sess := fmt.Sprintf("deadlines-%d", time.Now().UnixNano())
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 1)
		for range 256 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= DeadlineJobs; i = next.Add(1) {
					tool := jobs.Tool{Name: "t", Deferred: true,
						DeferredTimeout: 12*time.Second + time.Duration(i%10000)*time.Millisecond}
					j, err := engine.Call(ctx, jobs.NewCall{Tenant: tenantA, SessionID: sess, Tool: tool})
					if err == nil {
						a := jobs.Addr{Tenant: tenantA, SessionID: sess, CallID: j.CallID}
						_, err = engine.Defer(ctx, a, fmt.Sprintf("%s-%d", sess, i), "Working")
					}
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			cancel()
			b.Fatal(err)
		default:
		}
		select {
		case <-all:
		case <-time.After(2 * time.Minute):
			cancel()
			mu.Lock()
			n := len(late)
			mu.Unlock()
			b.Fatalf("%d of %d deadlines fired", n, DeadlineJobs)
		}
		cancel()
		slices.Sort(late)
		pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) }
		b.ReportMetric(pct(0.50), "late-p50-ms")
		b.ReportMetric(pct(0.99), "late-p99-ms")
		b.ReportMetric(pct(1), "late-max-ms")
	}
}
