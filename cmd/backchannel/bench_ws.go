package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// wsBenchOptions configure the broker benchmarks over real WebSocket connections.
type wsBenchOptions struct {
	sessions     *int
	idleSessions *int
	rounds       *int
	rate         *float64
	paced        *time.Duration
	stores       *string
}

func wsBenchFlags(fs *flag.FlagSet) *wsBenchOptions {
	return &wsBenchOptions{
		sessions:     fs.Int("ws-sessions", 1000, "concurrent sessions (a host and a text agent each) for latency and throughput"),
		idleSessions: fs.Int("idle-sessions", 10000, "idle sessions (one host connection each) for the memory figure"),
		rounds:       fs.Int("rounds", 20, "lifecycles per session in the throughput run (all sessions at once, back to back)"),
		rate:         fs.Float64("rate", 1000, "lifecycles/s offered by all sessions together in the latency run"),
		paced:        fs.Duration("latency-duration", 10*time.Second, "how long the latency run lasts"),
		stores:       fs.String("stores", "memory,redis", "stores to measure"),
	}
}

const benchKey = "benchkey"

// wsBench runs `backchannel serve` as a child process on loopback for each store and measures
// it from this process over real WebSocket connections: defer-ack latency with many sessions
// active, job lifecycles/s and frames/s per core of the broker, and memory per idle session.
func wsBench(redisAddr string, n int, o *wsBenchOptions) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	for _, store := range strings.Split(*o.stores, ",") {
		store = strings.TrimSpace(store)
		// The bench's sessions stay open (in their resume window) after their run, so the idle
		// figure's come on top of them: the tenant's session limit is raised to hold both.
		limit := strconv.Itoa(*o.sessions + *o.idleSessions + 100)
		args := []string{"serve", "--addr", "127.0.0.1:0", "--api-keys", "bench=" + benchKey, "--store", store,
			"--max-sessions-per-tenant", limit}
		if store == "redis" {
			addr := redisAddr
			if addr == "" {
				r, err := startRedis()
				if err != nil {
					return err
				}
				defer r.stop()
				addr = r.addr
			}
			args = append(args, "--redis-url", "redis://"+addr+"/0")
		}
		srv, err := startServe(bin, args)
		if err != nil {
			return err
		}
		fmt.Printf("== store %s: broker pid %d at %s\n", store, srv.cmd.Process.Pid, srv.addr)
		if err := runWSBenches(srv, n, o); err != nil {
			srv.stop()
			return err
		}
		if store == "memory" {
			if err := idleMemory(srv, *o.idleSessions); err != nil {
				srv.stop()
				return err
			}
		}
		srv.stop()
	}
	return nil
}

// served is a `backchannel serve` child process.
type served struct {
	cmd  *exec.Cmd
	addr string
}

var listenRE = regexp.MustCompile(`backchannel listening on http://(\S+)`)

// startServe runs `backchannel serve` with args and waits (at most 30 s) for its listen line.
// When it exits or hangs before that, it is killed and reaped, and the error ends with the last
// line it wrote to stderr (its reason).
func startServe(bin string, args []string) (*served, error) {
	return startServeEnv(bin, args, nil)
}

// startServeEnv is startServe with the environment env (nil: this process's).
func startServeEnv(bin string, args, env []string) (*served, error) {
	return startChild(bin, args, env, listenRE, "backchannel serve")
}

// startChild runs bin with args and env (nil: this process's) and waits (at most 30 s) for a
// line of its standard output that listen matches; its first group is the child's address.
// When the child exits or hangs before that, it is killed and reaped, and the error ends with
// the last line it wrote to stderr (its reason). The rest of its output is discarded.
func startChild(bin string, args, env []string, listen *regexp.Regexp, what string) (*served, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &lastLine{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	hung := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer hung.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listen.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return &served{cmd: cmd, addr: m[1]}, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, fmt.Errorf("%s did not print its listen line: %s", what, stderr.String())
}

// lastLine is an io.Writer that keeps the last complete line written to it.
type lastLine struct {
	mu         sync.Mutex
	line, part []byte
}

// Write keeps the last complete line of p (and the unfinished rest).
func (w *lastLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	if i := bytes.LastIndexByte(w.part, '\n'); i >= 0 {
		j := bytes.LastIndexByte(w.part[:i], '\n')
		w.line = append(w.line[:0], w.part[j+1:i]...)
		w.part = append(w.part[:0], w.part[i+1:]...)
	}
	if len(w.part) > 4<<10 { // a line that never ends: keep its start
		w.part = w.part[:4<<10]
	}
	return len(p), nil
}

// String returns the last complete line.
func (w *lastLine) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.line)
}

// stop interrupts the child (a graceful shutdown) and reaps it; one still running after 30 s
// is killed.
func (s *served) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// cpuSeconds is the child's CPU time so far (utime + stime from /proc).
func (s *served) cpuSeconds() float64 { return cpuSecondsOf(s.cmd.Process.Pid) }

// cpuSecondsOf is a process's CPU time so far (utime + stime from /proc).
func cpuSecondsOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks; 100 per second on Linux
}

// rss is the child's resident memory in bytes.
func (s *served) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// dialBench connects to the broker at addr and says hello with the members of hello; it returns
// the connection and the welcome.
func dialBench(ctx context.Context, addr string, hello map[string]any) (*frameConn, map[string]any, error) {
	c, err := dialFrames(ctx, "ws://"+addr+"/v1/ws", nil)
	if err != nil {
		return nil, nil, err
	}
	hello["type"], hello["protocol"] = "hello", frames.Protocol
	if err := c.send(ctx, hello); err != nil {
		c.close()
		return nil, nil, err
	}
	w, err := c.expectType(ctx, "welcome")
	if err != nil {
		c.close()
		return nil, nil, err
	}
	return c, w, nil
}

// firstError keeps the first error of concurrent workers.
type firstError struct {
	mu  sync.Mutex
	err error
}

// set records err unless an error was recorded before.
func (e *firstError) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

// get returns the first error recorded, or nil.
func (e *firstError) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// benchSession is a session with a host serving a deferred tool and a text agent.
type benchSession struct {
	host, agent *frameConn
	id          string
	seq         int
}

func newBenchSession(ctx context.Context, addr string) (*benchSession, error) {
	tools := []any{map[string]any{"name": "render_report", "description": "Renders a report.",
		"parameters": map[string]any{"type": "object"}, "deferred": true, "deferred_timeout": "1h"}}
	host, w, err := dialBench(ctx, addr, map[string]any{"role": "host", "api_key": benchKey, "tools": tools})
	if err != nil {
		return nil, err
	}
	if _, err := host.expectType(ctx, "tools.declared"); err != nil {
		host.close()
		return nil, err
	}
	agent, _, err := dialBench(ctx, addr, map[string]any{"role": "agent", "session_id": w["session_id"], "join_token": w["join_token"]})
	if err != nil {
		host.close()
		return nil, err
	}
	return &benchSession{host: host, agent: agent, id: w["session_id"].(string)}, nil
}

// close closes the session's connections.
func (s *benchSession) close() {
	s.host.close()
	s.agent.close()
}

// lifecycle runs one call → defer → result → consumed over the wire and returns the defer-ack
// latency: agent.tool_call → tool_call → tool_deferred → tool_deferred_ack → agent.tool_result
// (placeholder) → wait → tool_result → the wait's agent.tool_result.
func (s *benchSession) lifecycle(ctx context.Context) (time.Duration, error) {
	s.seq++
	id := fmt.Sprintf("c%d", s.seq)
	if err := s.agent.send(ctx, map[string]any{"type": "agent.tool_call", "call_id": id, "conversation_id": "root",
		"name": "render_report", "arguments": map[string]any{"q": s.seq}}); err != nil {
		return 0, err
	}
	tc, err := s.host.expectType(ctx, "tool_call")
	if err != nil {
		return 0, err
	}
	handle := fmt.Sprintf("%s-%d", s.id, s.seq)
	start := time.Now()
	if err := s.host.send(ctx, map[string]any{"type": "tool_deferred", "call_id": tc["call_id"], "handle": handle, "status_label": "Rendering"}); err != nil {
		return 0, err
	}
	ack, err := s.host.expectType(ctx, "tool_deferred_ack")
	if err != nil {
		return 0, err
	}
	latency := time.Since(start)
	if ack["accepted"] != true {
		return 0, fmt.Errorf("defer rejected: %v", ack)
	}
	if _, err := s.agent.expectType(ctx, "agent.tool_result"); err != nil { // the placeholder
		return 0, err
	}
	if err := s.agent.send(ctx, map[string]any{"type": "agent.tool_call", "call_id": "w" + id, "conversation_id": "root",
		"name": "wait", "arguments": map[string]any{"tool_call_id": id}}); err != nil {
		return 0, err
	}
	if err := s.host.send(ctx, map[string]any{"type": "tool_result", "handle": handle, "output": map[string]any{"url": "https://example.com/r.pdf"}}); err != nil {
		return 0, err
	}
	r, err := s.agent.expectType(ctx, "agent.tool_result")
	if err != nil {
		return 0, err
	}
	if r["call_id"] != "w"+id || r["kind"] != "result" {
		return 0, fmt.Errorf("unexpected wait result %v", r)
	}
	return latency, nil
}

// framesPerLifecycle counts the frames a lifecycle moves through the broker (in and out).
const framesPerLifecycle = 9

func runWSBenches(srv *served, n int, o *wsBenchOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sessions := make([]*benchSession, *o.sessions)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.close()
			}
		}
	}()
	var failed firstError
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := newBenchSession(ctx, srv.addr)
			if err != nil {
				failed.set(err)
				return
			}
			sessions[i] = s
		}()
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		return fmt.Errorf("setting up sessions: %w", err)
	}
	// Throughput: every session runs its lifecycles back to back, all at once (the broker is
	// saturated; the latency of this run is queueing).
	r := runLifecycles(ctx, srv, sessions, func(time.Time) func() (time.Time, bool) {
		left := *o.rounds
		return func() (time.Time, bool) { left--; return time.Time{}, left >= 0 }
	})
	if r.err != nil {
		return fmt.Errorf("lifecycles: %w", r.err)
	}
	fmt.Printf("job lifecycles over WebSocket (call → defer → result → consumed), %d sessions back to back: %.0f/s  (%d in %.2fs)\n",
		len(sessions), float64(r.done)/r.elapsed.Seconds(), r.done, r.elapsed.Seconds())
	fmt.Printf("broker CPU: %.2f s for %d frames = %.0f frames/s per core\n", r.cpu, r.done*framesPerLifecycle,
		float64(r.done*framesPerLifecycle)/r.cpu)
	fmt.Printf("defer-ack latency while saturated: %s\n", percentiles(r.latencies))

	// Latency: every session is active, starting a lifecycle every period (sessions / rate),
	// at a random phase, for the run's duration.
	period := time.Duration(float64(len(sessions)) / *o.rate * float64(time.Second))
	r = runLifecycles(ctx, srv, sessions, func(t0 time.Time) func() (time.Time, bool) {
		end := t0.Add(*o.paced)
		next, first := t0.Add(time.Duration(rand.Int64N(int64(period)))), true
		return func() (time.Time, bool) {
			if !first { // the next start that is not past yet
				for next = next.Add(period); next.Before(time.Now()); next = next.Add(period) {
				}
			}
			first = false
			return next, next.Before(end)
		}
	})
	if r.err != nil {
		return fmt.Errorf("paced lifecycles: %w", r.err)
	}
	fmt.Printf("defer-ack latency, %d sessions active at %.0f lifecycles/s (%.0f done/s, broker CPU %.0f%%): %s\n",
		len(sessions), *o.rate, float64(r.done)/r.elapsed.Seconds(), 100*r.cpu/r.elapsed.Seconds(), percentiles(r.latencies))
	return nil
}

// lifecycleRun is what runLifecycles measured.
type lifecycleRun struct {
	latencies [][]time.Duration // the defer-ack latencies of each session
	done      int64             // lifecycles completed
	elapsed   time.Duration
	cpu       float64 // the broker's CPU seconds
	err       error   // the first lifecycle that failed
}

// runLifecycles runs lifecycles on every session at once until each session's schedule says
// stop. schedule is called once per session with the start of the run; the function it returns
// gives, before each lifecycle, the time to start it at (the zero time: at once) and whether to
// run it.
func runLifecycles(ctx context.Context, srv *served, sessions []*benchSession, schedule func(t0 time.Time) func() (time.Time, bool)) lifecycleRun {
	r := lifecycleRun{latencies: make([][]time.Duration, len(sessions))}
	var done atomic.Int64
	var failed firstError
	var wg sync.WaitGroup
	cpu0, t0 := srv.cpuSeconds(), time.Now()
	for i, s := range sessions {
		next := schedule(t0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				at, ok := next()
				if !ok {
					return
				}
				time.Sleep(time.Until(at))
				d, err := s.lifecycle(ctx)
				if err != nil {
					failed.set(err)
					return
				}
				r.latencies[i] = append(r.latencies[i], d)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	r.elapsed, r.cpu = time.Since(t0), srv.cpuSeconds()-cpu0
	r.done, r.err = done.Load(), failed.get()
	return r
}

// percentiles formats p50, p99 and the maximum of the latencies.
func percentiles(lat [][]time.Duration) string {
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return "no samples"
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))].Round(10 * time.Microsecond) }
	return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d defers)", pct(0.50), pct(0.99), pct(1), len(all))
}

// idleMemory attaches idle sessions (one host connection each, one tool declared) and reports
// the broker's resident memory per session.
func idleMemory(srv *served, count int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	time.Sleep(2 * time.Second) // the previous run's garbage
	before := srv.rss()
	conns := make([]*frameConn, count)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	tools := []any{map[string]any{"name": "lookup", "description": "Looks something up.", "parameters": map[string]any{"type": "object"}}}
	var failed firstError
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := dialBench(ctx, srv.addr, map[string]any{"role": "host", "api_key": benchKey, "tools": tools})
			if err != nil {
				failed.set(err)
				return
			}
			conns[i] = c
			if _, err := c.expectType(ctx, "tools.declared"); err != nil {
				failed.set(err)
			}
		}()
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		return fmt.Errorf("idle sessions: %w", err)
	}
	time.Sleep(3 * time.Second)
	after := srv.rss()
	per := float64(after-before) / float64(count)
	fmt.Printf("memory per idle session (%d sessions, one host connection each): %.1f KiB (RSS %d MiB → %d MiB)\n",
		count, per/1024, before>>20, after>>20)
	return nil
}

// privateRedis is a redis-server started for the benchmark.
type privateRedis struct {
	cmd  *exec.Cmd
	addr string
	dir  string
}

func startRedis() (*privateRedis, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server is not installed (apt-get install -y redis-server), or pass -redis HOST:PORT")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "bcbench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r := &privateRedis{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", r.addr); err == nil {
			c.Close()
			return r, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stop()
	return nil, errors.New("redis-server did not start")
}

func (r *privateRedis) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = os.RemoveAll(r.dir)
}
