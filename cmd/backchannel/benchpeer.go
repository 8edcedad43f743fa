package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// peerResult is the JSON line a peer benchmark harness (peerbench, which runs hibiken/asynq and
// the raw Redis ceiling on one private Redis; not part of this repository) expects of a peer.
type peerResult struct {
	System      string  `json:"system"`
	Jobs        int     `json:"jobs"`
	Seconds     float64 `json:"seconds"`
	JobsPerS    float64 `json:"jobs_per_s"`
	RedisCmds   int64   `json:"redis_cmds"`
	CmdsPerJob  float64 `json:"cmds_per_job"`
	Requests    int64   `json:"requests"`
	ReqsPerJob  float64 `json:"reqs_per_job"`
	RoundTrips  int64   `json:"round_trips"`
	RedisCPUPct float64 `json:"redis_cpu_pct"`
	GoCPUPct    float64 `json:"go_cpu_pct"`
	Lifecycle   string  `json:"lifecycle"`
	Sessions    int     `json:"sessions"`
}

// requestHook counts the commands a client sends and the round trips they take.
type requestHook struct{ cmds, trips atomic.Int64 }

func (h *requestHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *requestHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}
func (h *requestHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// peerLifecycles runs n job lifecycles — call → defer → result → consumed — through the job
// engine over the Redis store at addr, from sessions concurrent sessions, and measures them
// the way the peer benchmark harness measures its peers: the job engine in process against Redis,
// like asynq's client and server in asynqbench. pipelines and maxBatch tune the Redis store's
// batcher (0 keeps its defaults).
func peerLifecycles(addr string, n, sessions, pipelines, maxBatch int) (*peerResult, error) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer rdb.Close()
	hook := &requestHook{}
	rdb.AddHook(hook)
	store, err := redisstore.New(redisstore.Options{Client: rdb, Prefix: "bcbench:", Pipelines: pipelines, MaxBatch: maxBatch})
	if err != nil {
		return nil, err
	}
	defer store.Close()

	// consumed: every terminal transition is handed to the job's consumer (the agent side).
	var consumed sync.Map // call id → chan struct{}
	engine := jobs.NewEngine(store, jobs.Options{OnChange: func(c jobs.Change) {
		if c.Event == jobs.EventCompleted {
			if ch, ok := consumed.LoadAndDelete(c.Job.CallID); ok {
				close(ch.(chan struct{}))
			}
		}
	}})
	tool := jobs.Tool{Name: "render_report", Deferred: true, DeferredTimeout: 2 * time.Hour, NotifyOnComplete: true}
	args := json.RawMessage(`{"report":"q3","format":"pdf"}`)
	out := json.RawMessage(`{"url":"https://example.com/r/q3.pdf"}`)

	// Warm the script cache and the connections. Handles are unique per run: a Redis used by an
	// earlier run still holds that run's burned handles.
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	if err := oneLifecycle(ctx, engine, &consumed, "warm-"+run, tool, args, out, "warm-h-"+run); err != nil {
		return nil, err
	}
	cmd0, err := redisCommands(ctx, rdb)
	if err != nil {
		return nil, err
	}
	cpu0, _ := redisCPU(ctx, rdb)
	req0, trip0 := hook.cmds.Load(), hook.trips.Load()
	goCPU0 := processCPU()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed firstError
	start := time.Now()
	for w := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := fmt.Sprintf("bench-%s-%d", run, w)
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if err := oneLifecycle(ctx, engine, &consumed, sess, tool, args, out, fmt.Sprintf("%s-h%d", sess, i)); err != nil {
					failed.set(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.get(); err != nil {
		return nil, err
	}
	cmd1, _ := redisCommands(ctx, rdb)
	cpu1, _ := redisCPU(ctx, rdb)
	goCPU1 := processCPU()
	reqs, trips := hook.cmds.Load()-req0, hook.trips.Load()-trip0
	return &peerResult{
		System: "backchannel", Jobs: n, Seconds: round3(elapsed.Seconds()),
		JobsPerS:    round0(float64(n) / elapsed.Seconds()),
		RedisCmds:   cmd1 - cmd0 - 1, // the INFO that measured it
		CmdsPerJob:  round2(float64(cmd1-cmd0-1) / float64(n)),
		Requests:    reqs,
		ReqsPerJob:  round2(float64(reqs) / float64(n)),
		RoundTrips:  trips,
		RedisCPUPct: round0(100 * (cpu1 - cpu0) / elapsed.Seconds()),
		GoCPUPct:    round0(100 * (goCPU1 - goCPU0) / elapsed.Seconds()),
		Lifecycle:   "call -> defer -> result -> consumed (job engine, Redis store)",
		Sessions:    sessions,
	}, nil
}

// oneLifecycle runs one call → defer → result → consumed.
func oneLifecycle(ctx context.Context, e *jobs.Engine, consumed *sync.Map, sess string, tool jobs.Tool, args, out json.RawMessage, handle string) error {
	j, err := e.Call(ctx, jobs.NewCall{Tenant: "bench", SessionID: sess, Tool: tool, Arguments: args})
	if err != nil {
		return err
	}
	done := make(chan struct{})
	consumed.Store(j.CallID, done)
	a := jobs.Addr{Tenant: "bench", SessionID: sess, CallID: j.CallID}
	ack, err := e.Defer(ctx, a, handle, "Rendering the report")
	if err != nil {
		return err
	}
	if !ack.Accepted {
		return fmt.Errorf("defer rejected: %s", ack.Reason)
	}
	if _, err := e.Result(ctx, jobs.Addr{Tenant: "bench", SessionID: sess, Handle: handle}, out, "", false); err != nil {
		return err
	}
	<-done
	return nil
}

// redisCommands is the total of `calls` in INFO commandstats.
func redisCommands(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range strings.Split(info, "\n") {
		if i := strings.Index(l, "calls="); i >= 0 {
			v := l[i+6:]
			if j := strings.IndexByte(v, ','); j >= 0 {
				v = v[:j]
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
		}
	}
	return total, nil
}

// redisCPU is redis-server's CPU seconds (user + sys).
func redisCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(l, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return total, nil
}

// processCPU is this process's CPU seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func round0(f float64) float64 { return float64(int64(f + 0.5)) }
func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
