package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/coder/websocket"
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
		args := []string{"serve", "--addr", "127.0.0.1:0", "--api-keys", "bench=" + benchKey, "--store", store}
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

func startServe(bin string, args []string) (*served, error) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return &served{cmd: cmd, addr: m[1]}, nil
		}
	}
	_ = cmd.Process.Kill()
	return nil, errors.New("backchannel serve did not print its listen line")
}

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
func (s *served) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
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

// benchConn is one client WebSocket connection with a reader routing frames to a channel.
type benchConn struct {
	ws     *websocket.Conn
	frames chan map[string]any
	wmu    sync.Mutex
}

func dialBench(ctx context.Context, addr string, hello map[string]any) (*benchConn, map[string]any, error) {
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/v1/ws", nil)
	if err != nil {
		return nil, nil, err
	}
	ws.SetReadLimit(8 << 20)
	c := &benchConn{ws: ws, frames: make(chan map[string]any, 64)}
	go func() {
		defer close(c.frames)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			var f map[string]any
			if json.Unmarshal(b, &f) == nil {
				c.frames <- f
			}
		}
	}()
	hello["type"], hello["protocol"] = "hello", "backchannel.v1"
	if err := c.send(ctx, hello); err != nil {
		return nil, nil, err
	}
	w, err := c.expect(ctx, "welcome")
	return c, w, err
}

func (c *benchConn) send(ctx context.Context, f map[string]any) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// expect returns the next frame of type typ, skipping others.
func (c *benchConn) expect(ctx context.Context, typ string) (map[string]any, error) {
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				return nil, errors.New("connection closed")
			}
			if f["type"] == typ {
				return f, nil
			}
			if f["type"] == "error" {
				return nil, fmt.Errorf("error frame: %v", f)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", typ, ctx.Err())
		}
	}
}

func (c *benchConn) close() { _ = c.ws.Close(websocket.StatusNormalClosure, "") }

// benchSession is a session with a host serving a deferred tool and a text agent.
type benchSession struct {
	host, agent *benchConn
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
	if _, err := host.expect(ctx, "tools.declared"); err != nil {
		return nil, err
	}
	agent, _, err := dialBench(ctx, addr, map[string]any{"role": "agent", "session_id": w["session_id"], "join_token": w["join_token"]})
	if err != nil {
		return nil, err
	}
	return &benchSession{host: host, agent: agent, id: w["session_id"].(string)}, nil
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
	tc, err := s.host.expect(ctx, "tool_call")
	if err != nil {
		return 0, err
	}
	handle := fmt.Sprintf("%s-%d", s.id, s.seq)
	start := time.Now()
	if err := s.host.send(ctx, map[string]any{"type": "tool_deferred", "call_id": tc["call_id"], "handle": handle, "status_label": "Rendering"}); err != nil {
		return 0, err
	}
	ack, err := s.host.expect(ctx, "tool_deferred_ack")
	if err != nil {
		return 0, err
	}
	latency := time.Since(start)
	if ack["accepted"] != true {
		return 0, fmt.Errorf("defer rejected: %v", ack)
	}
	if _, err := s.agent.expect(ctx, "agent.tool_result"); err != nil { // the placeholder
		return 0, err
	}
	if err := s.agent.send(ctx, map[string]any{"type": "agent.tool_call", "call_id": "w" + id, "conversation_id": "root",
		"name": "wait", "arguments": map[string]any{"tool_call_id": id}}); err != nil {
		return 0, err
	}
	if err := s.host.send(ctx, map[string]any{"type": "tool_result", "handle": handle, "output": map[string]any{"url": "https://example.com/r.pdf"}}); err != nil {
		return 0, err
	}
	r, err := s.agent.expect(ctx, "agent.tool_result")
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
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 64)
	for i := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := newBenchSession(ctx, srv.addr)
			if err != nil {
				firstErr.Store(err)
				return
			}
			sessions[i] = s
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return fmt.Errorf("setting up sessions: %w", err)
	}
	defer func() {
		for _, s := range sessions {
			s.host.close()
			s.agent.close()
		}
	}()
	// Throughput: every session runs its lifecycles back to back, all at once (the broker is
	// saturated; the latency of this run is queueing).
	lat := make([][]time.Duration, len(sessions))
	cpu0, t0 := srv.cpuSeconds(), time.Now()
	var done atomic.Int64
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < *o.rounds; r++ {
				d, err := s.lifecycle(ctx)
				if err != nil {
					firstErr.Store(err)
					return
				}
				lat[i] = append(lat[i], d)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := srv.cpuSeconds() - cpu0
	if err, ok := firstErr.Load().(error); ok {
		return fmt.Errorf("lifecycles: %w", err)
	}
	lifecycles := done.Load()
	fmt.Printf("job lifecycles over WebSocket (call → defer → result → consumed), %d sessions back to back: %.0f/s  (%d in %.2fs)\n",
		len(sessions), float64(lifecycles)/elapsed.Seconds(), lifecycles, elapsed.Seconds())
	fmt.Printf("broker CPU: %.2f s for %d frames = %.0f frames/s per core\n", cpu, lifecycles*framesPerLifecycle,
		float64(lifecycles*framesPerLifecycle)/cpu)
	fmt.Printf("defer-ack latency while saturated: %s\n", percentiles(lat))

	// Latency: every session is active, starting a lifecycle every period (sessions / rate),
	// at a random phase, for the run's duration.
	period := time.Duration(float64(len(sessions)) / *o.rate * float64(time.Second))
	lat = make([][]time.Duration, len(sessions))
	done.Store(0)
	cpu0, t0 = srv.cpuSeconds(), time.Now()
	end := t0.Add(*o.paced)
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := t0.Add(time.Duration(rand.Int64N(int64(period))))
			for next.Before(end) {
				time.Sleep(time.Until(next))
				d, err := s.lifecycle(ctx)
				if err != nil {
					firstErr.Store(err)
					return
				}
				lat[i] = append(lat[i], d)
				done.Add(1)
				for next = next.Add(period); next.Before(time.Now()); next = next.Add(period) {
				}
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(t0)
	cpu = srv.cpuSeconds() - cpu0
	if err, ok := firstErr.Load().(error); ok {
		return fmt.Errorf("paced lifecycles: %w", err)
	}
	fmt.Printf("defer-ack latency, %d sessions active at %.0f lifecycles/s (%.0f done/s, broker CPU %.0f%%): %s\n",
		len(sessions), *o.rate, float64(done.Load())/elapsed.Seconds(), 100*cpu/elapsed.Seconds(), percentiles(lat))
	return nil
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
	conns := make([]*benchConn, count)
	tools := []any{map[string]any{"name": "lookup", "description": "Looks something up.", "parameters": map[string]any{"type": "object"}}}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := dialBench(ctx, srv.addr, map[string]any{"role": "host", "api_key": benchKey, "tools": tools})
			if err != nil {
				firstErr.Store(err)
				return
			}
			if _, err := c.expect(ctx, "tools.declared"); err != nil {
				firstErr.Store(err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return fmt.Errorf("idle sessions: %w", err)
	}
	time.Sleep(3 * time.Second)
	after := srv.rss()
	per := float64(after-before) / float64(count)
	fmt.Printf("memory per idle session (%d sessions, one host connection each): %.1f KiB (RSS %d MiB → %d MiB)\n",
		count, per/1024, before>>20, after>>20)
	for _, c := range conns {
		c.close()
	}
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
