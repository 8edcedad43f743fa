package storetest

import (
	"context"
	"encoding/json"
	"fmt"
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
