package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is the broker deployment of a run.
type Mode string

// The modes of a run.
const (
	// ModeMemory is one node on the memory store.
	ModeMemory Mode = "memory"
	// ModeRedis is one node on a private Redis.
	ModeRedis Mode = "redis"
	// ModeCluster is three nodes on one private Redis, with faults: kill -9 of a node (and a
	// replacement on a new port), Redis Kill and Restart, dropped client connections.
	ModeCluster Mode = "redis-cluster"
)

// Config sizes one run.
type Config struct {
	Mode     Mode
	Seed     uint64
	Sessions int // sessions, each with a host and a text agent
	Ops      int // operations of each agent's schedule
	// Faults is the number of faults of ModeCluster, spread over the load (at least one node
	// kill and one Redis restart when it is 3 or more).
	Faults int
	// Quiesce bounds the wait, after the load and the faults, for every call's outcome.
	Quiesce time.Duration
	// Mutate routes every client connection through a proxy that corrupts broker frames
	// (the checker's self-check); nil for none, a zero Mutation for a plain proxy.
	Mutate *Mutation
	// Logger gets the run's progress (nil: nothing is logged).
	Logger *slog.Logger
}

func (c Config) reconnectBound() time.Duration { return 60 * time.Second }

func (c Config) barrierBound() time.Duration {
	if c.Mutate != nil {
		return 3 * time.Second
	}
	return 15 * time.Second
}

// Name is the run's name in reports: mode and seed.
func (c Config) Name() string { return fmt.Sprintf("%s/seed%d", c.Mode, c.Seed) }

// Stats counts what a run did.
type Stats struct {
	Sessions, Conns, Frames, Calls int
	NodeKills, RedisRestarts       int
	Drops                          int // client connections the harness dropped (schedule, faults, stalls)
	Mutations                      int // frames the proxy dropped or duplicated
	Unresolved                     int // calls still without an outcome after the quiescence bound
}

// Result is what one run produced.
type Result struct {
	Config     Config
	Histories  []History
	Violations []Violation
	Stats      Stats
	Elapsed    time.Duration
	NodeLogs   string // the tails of the nodes' logs
	StoreDump  string // what Redis holds of the jobs the violations name (dumpStore)
}

// runner is one run in progress.
type runner struct {
	name     string
	tag      string
	cfg      Config
	ctx      context.Context
	cl       *cluster
	px       *proxy
	log      *slog.Logger
	ops      atomic.Int64
	sessions []*sessionRun
}

// sessionRun is one session of a run: its history, host and agent.
type sessionRun struct {
	run       *runner
	idx       int
	name      string
	seed      uint64
	rec       *recorder
	id        string
	joinToken string
	host      *hostActor
	agent     *agentActor
}

// pick is the node a new connection goes to: a random live node (or the proxy).
func (run *runner) pick() string {
	if run.px != nil {
		if run.cl.pick() == "" {
			return ""
		}
		return run.px.url
	}
	return run.cl.pick()
}

// Run builds nothing: it starts the brokers of cfg.Mode from bin, plays the load (and the
// faults), lets the run quiesce, and checks the histories.
func Run(t testing.TB, bin string, cfg Config) Result {
	t.Helper()
	start := time.Now()
	if cfg.Quiesce == 0 {
		cfg.Quiesce = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = discard
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+cfg.Quiesce+time.Duration(cfg.Ops*cfg.Sessions)*20*time.Millisecond)
	defer cancel()
	cl, err := startCluster(t, bin, cfg.Mode, cfg.Seed)
	if err != nil {
		t.Fatalf("faulttest: %s: %v", cfg.Name(), err)
	}
	run := &runner{name: cfg.Name(), tag: fmt.Sprintf("%d", cfg.Seed), cfg: cfg, ctx: ctx, cl: cl, log: log}
	if cfg.Mutate != nil {
		px, err := startProxy(cl.pick, *cfg.Mutate, cfg.Seed)
		if err != nil {
			t.Fatalf("faulttest: proxy: %v", err)
		}
		defer px.close()
		run.px = px
	}
	log.Info("faulttest: run starts", "run", run.name, "sessions", cfg.Sessions, "ops", cfg.Ops, "faults", cfg.Faults)

	// Sessions: created over HTTP, then a host and an agent each.
	for i := range cfg.Sessions {
		s := &sessionRun{run: run, idx: i, name: fmt.Sprintf("s%02d", i), seed: cfg.Seed*1000003 + uint64(i)}
		s.rec = newRecorder(run.name, cfg.Seed, s.name)
		id, jt, err := cl.createSession(ctx)
		if err != nil {
			t.Fatalf("faulttest: %s: creating session %d: %v", run.name, i, err)
		}
		s.id, s.joinToken = id, jt
		s.rec.setSessionID(id)
		s.host, s.agent = newHost(s), newAgent(s)
		run.sessions = append(run.sessions, s)
	}

	// The load, and the faults beside it.
	stopFaults := make(chan struct{})
	faultsDone := make(chan [3]int, 1)
	frng := rand.New(rand.NewPCG(cfg.Seed, 0xfa))
	go func() {
		var k, r, d int
		if cfg.Mode == ModeCluster {
			k, r, d = run.injectFaults(planFaults(frng, cfg.Sessions*cfg.Ops, cfg.Faults), frng, stopFaults)
		}
		faultsDone <- [3]int{k, r, d}
	}()
	var wg sync.WaitGroup
	for _, s := range run.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.load()
		}()
	}
	wg.Wait()
	close(stopFaults)
	fd := <-faultsDone
	log.Info("faulttest: load done, quiescing", "run", run.name, "elapsed", time.Since(start).Round(time.Millisecond))

	// Quiescence, final barriers, the end phase.
	var unresolved atomic.Int64
	for _, s := range run.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unresolved.Add(int64(s.settle()))
		}()
	}
	wg.Wait()
	for _, s := range run.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.host.l.stop()
			s.agent.l.stop()
		}()
	}
	wg.Wait()
	cancel()
	res := Result{Config: cfg, Elapsed: time.Since(start)}
	for _, s := range run.sessions {
		res.Histories = append(res.Histories, s.rec.history())
	}
	res.Violations = Check(res.Histories)
	res.Stats = stats(res.Histories)
	res.Stats.NodeKills, res.Stats.RedisRestarts = fd[0], fd[1]
	res.Stats.Unresolved = int(unresolved.Load())
	if run.px != nil {
		res.Stats.Mutations = int(run.px.mutated.Load())
	}
	if len(res.Violations) > 0 {
		res.NodeLogs = cl.logTail(15)
		if cl.redis != nil {
			res.StoreDump = dumpStore(cl.redis.URL(), res.Violations, res.Histories)
		}
	}
	cl.stop()
	log.Info("faulttest: run done", "run", run.name, "elapsed", res.Elapsed.Round(time.Millisecond),
		"violations", len(res.Violations), "calls", res.Stats.Calls, "frames", res.Stats.Frames)
	return res
}

// load connects the session's host and agent and plays the agent's schedule.
func (s *sessionRun) load() {
	s.host.l.start()
	if _, _, err := s.host.l.waitReady(s.run.ctx); err != nil {
		return
	}
	s.agent.l.start()
	if _, _, err := s.agent.l.waitReady(s.run.ctx); err != nil {
		return
	}
	r := rand.New(rand.NewPCG(s.seed, 0x5c))
	s.agent.call("status", map[string]any{"state": "working", "title": "fault test " + s.name})
	s.agent.runOps(r, schedule(r, s.run.cfg.Ops), func() { s.run.ops.Add(1) })
}

// settle lets the session quiesce: every call's outcome (bounded), the host's workers, the
// final barriers; then half the sessions end. It returns the number of unresolved calls.
func (s *sessionRun) settle() int {
	todo := s.agent.quiesce(s.run.cfg.Quiesce)
	if len(todo) > 0 {
		s.rec.note(-1, HarnessNote{Note: NoteUnresolved, Role: "agent", Text: strings.Join(todo, " ")})
		s.run.log.Warn("faulttest: calls without outcome after the quiescence bound", "run", s.run.name, "session", s.name, "calls", todo)
	}
	if !s.host.idle(10 * time.Second) {
		s.rec.note(-1, HarnessNote{Note: NoteUnresolved, Role: "host", Text: "host workers still running"})
	}
	_ = s.agent.l.barrier()
	_ = s.host.l.barrier()
	if s.seed%2 == 0 && !s.agent.l.isLost() && !s.host.l.isLost() {
		s.endPhase(s.seed%4 == 0)
	}
	return len(todo)
}

// stats counts a run's histories.
func stats(hs []History) Stats {
	var st Stats
	st.Sessions = len(hs)
	for _, h := range hs {
		st.Conns += len(h.Conns)
		for _, e := range h.Events {
			switch e.Dir {
			case Sent, Recv:
				st.Frames++
				if e.Dir == Sent && h.Conns[e.Conn].Role == "agent" && strings.Contains(string(e.Raw), `"agent.tool_call"`) {
					st.Calls++
				}
			case Closed:
				var n CloseNote
				_ = json.Unmarshal(e.Raw, &n)
				if n.By == "client" && n.Code == 0 {
					st.Drops++ // aborted by the harness (a closed normally at the end has 1000)
				}
			}
		}
	}
	return st
}

// postSession creates a session with POST /v1/sessions and the dev key.
func postSession(ctx context.Context, base string) (string, string, error) {
	if base == "" {
		return "", "", fmt.Errorf("no live node")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/sessions", strings.NewReader(`{}`))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer dev")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var body struct {
		SessionID string `json:"session_id"`
		JoinToken string `json:"join_token"`
		Code      string `json:"code"`
		Message   string `json:"message"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusCreated {
		return "", "", fmt.Errorf("POST /v1/sessions: %d %s %s", resp.StatusCode, body.Code, body.Message)
	}
	return body.SessionID, body.JoinToken, nil
}
