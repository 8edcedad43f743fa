package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/broker/ws"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/memstore"
	backchannel "github.com/backchannel-io/backchannel/sdk/go"
)

// demo runs `backchannel demo`: a broker in this process (memory store, scripted model) on a
// free loopback port, a built-in host (the Go SDK) serving book_table, and a scripted caller
// that talks it through a background job — the hand-off, two milestones, a decision and the
// completion — while the session's timeline is printed as it happens, next to what the caller
// and the agent say. It needs no keys and no services.
func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address of the demo's broker")
	verbose := fs.Bool("v", false, "also print the broker's logs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return runDemo(ctx, os.Stdout, *addr, log)
}

// runDemo plays the demo's story on a broker listening on addr, printing to w.
func runDemo(ctx context.Context, w io.Writer, addr string, log *slog.Logger) error {
	base, stop, err := startDemoBroker(ctx, addr, log)
	if err != nil {
		return err
	}
	defer stop()
	// Whatever way the story ends, every goroutine it started stops (before the broker does).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &demoPrinter{w: w, start: time.Now()}
	out.line("broker", "listening on %s (memory store, scripted model)", base)

	done := make(chan string, 1) // the completion's narration state
	host, err := backchannel.Connect(ctx, backchannel.Options{
		URL: base, APIKey: demoKey, Logger: log,
		Tools: []backchannel.Tool{{Decl: demoTool, Handler: demoHandler(out)}},
		OnEvent: func(e backchannel.Event) {
			if n, ok := e.Frame.(*frames.ToolJobNarration); ok && n.Kind == frames.NarrationCompletion &&
				(n.State == frames.NarrationDelivered || n.State == frames.NarrationFailed) {
				select {
				case done <- string(n.State):
				default:
				}
			}
		},
	})
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	defer host.Close()
	out.line("host", "attached: session %s, tool book_table (deferred)", host.SessionID())

	timeline := make(chan error, 1)
	go func() { timeline <- followTimeline(ctx, base, host.SessionID(), out) }()

	caller, err := startDemoCaller(ctx, base, host.SessionID(), host.JoinToken(), out)
	if err != nil {
		return fmt.Errorf("caller: %w", err)
	}
	defer caller.stop()
	out.line("caller", `says: call book_table {"party":4}`)
	if err := caller.conn.send(ctx, &frames.CallerText{Text: `call book_table {"party":4}`}); err != nil {
		return err
	}

	select {
	case state := <-done:
		out.line("host", "completion narration %s", state)
	case <-ctx.Done():
		return errors.New("the story did not finish within two minutes")
	}
	time.Sleep(300 * time.Millisecond) // the last transcript reaches the caller
	if err := host.End(ctx); err != nil {
		return fmt.Errorf("session.end: %w", err)
	}
	if err := <-timeline; err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	out.line("demo", "session ended. Next: `backchannel serve` and open http://127.0.0.1:8080/ to try it yourself")
	return nil
}

const demoKey = "demo"

var demoTool = frames.ToolDecl{Name: "book_table", Description: "Books a restaurant table",
	Parameters: json.RawMessage(`{"type":"object","properties":{"party":{"type":"integer"}},"required":["party"]}`),
	Deferred:   true, DeferredTimeout: frames.Duration(10 * time.Minute), ExpectedDuration: "minutes"}

// demoHandler is the built-in host's book_table: it defers, reports progress and two
// milestones, asks the caller a decision, and completes with the chosen time.
func demoHandler(out *demoPrinter) backchannel.Handler {
	return func(ctx context.Context, call *backchannel.Call) (any, error) {
		job, err := call.Defer(ctx, "table-"+call.CallID[len("call_"):], "booking your table")
		if err != nil {
			return nil, err
		}
		out.line("host", "deferred %s as %s", call.CallID, job.Handle)
		go func() {
			ctx := job.Context()
			// step waits d, or reports false when the job ended first (cancelled, session over).
			step := func(d time.Duration) bool {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
					return true
				case <-ctx.Done():
					return false
				}
			}
			if !step(500 * time.Millisecond) {
				return
			}
			_ = job.Progress(ctx, "calling the restaurant")
			if !step(time.Second) {
				return
			}
			_ = job.Milestone(ctx, "the restaurant picked up")
			if !step(1500 * time.Millisecond) {
				return
			}
			_ = job.Milestone(ctx, "they have two tables left")
			if !step(500 * time.Millisecond) {
				return
			}
			id, err := job.Ask(ctx, frames.Interaction{Prompt: "Would you like 7:30 or 8:15?", Options: []string{"7:30", "8:15"}})
			if err != nil {
				out.line("host", "ask failed: %v", err)
				return
			}
			var a backchannel.InteractionAnswer
			select {
			case a = <-job.Answers():
			case <-ctx.Done():
				return
			}
			out.line("host", "answer to %s: %q (option %s)", id, a.Text, a.Option)
			if !step(time.Second) {
				return
			}
			if err := job.Result(ctx, map[string]any{"party": 4, "time": a.Option, "confirmation": "T-4711"}); err != nil {
				out.line("host", "result failed: %v", err)
			}
		}()
		return nil, nil
	}
}

// startDemoBroker runs a broker with the memory store and the scripted model on addr.
func startDemoBroker(ctx context.Context, addr string, log *slog.Logger) (string, func(), error) {
	// Its key is public (the demo prints it), like dev mode's: only loopback Host headers.
	node := broker.NewNode(broker.Config{APIKeys: map[string]string{demoKey: "demo"}, Logger: log, LoopbackHostsOnly: true,
		DefaultModel: "scripted", Models: map[string]model.Factory{"scripted": scripted.New}}, memstore.New(nil))
	wsh := ws.NewHandler(node, ws.Options{Logger: log})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := broker.NewHTTPServer(node.Handler(wsh, routes), broker.HTTPLimits{})
	runCtx, cancelRun := context.WithCancel(ctx)
	ran, served := make(chan struct{}), make(chan struct{})
	go func() { defer close(ran); _ = node.Run(runCtx) }()
	go func() { defer close(served); _ = srv.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = node.Shutdown(sctx, true)
		wsh.CloseAll(int(websocket.StatusGoingAway), "demo over")
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close() // what did not finish in time
		}
		_ = wsh.Wait(sctx)
		cancelRun()
		<-ran
		<-served
	}
	return "http://" + displayAddr(ln.Addr()), stop, nil
}

// demoCallerConn is the demo's scripted caller: a WebSocket caller of the session that prints
// what the agent says and answers the decision once the agent has asked it and fallen silent.
type demoCallerConn struct {
	conn      *frameConn
	lastAudio atomic.Int64 // when the agent's audio last arrived, Unix nanoseconds
	done      chan struct{}
}

// startDemoCaller attaches the scripted caller to the session with its join token.
func startDemoCaller(ctx context.Context, base, sessionID, joinToken string, out *demoPrinter) (*demoCallerConn, error) {
	c := &demoCallerConn{done: make(chan struct{})}
	c.lastAudio.Store(time.Now().UnixNano())
	conn, err := dialFrames(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/ws", func() { // the agent's audio, 20 ms a message in real time
		c.lastAudio.Store(time.Now().UnixNano())
	})
	if err != nil {
		return nil, err
	}
	c.conn = conn
	if err := conn.send(ctx, &frames.Hello{Protocol: frames.Protocol, Role: frames.RoleCaller, SessionID: sessionID, JoinToken: joinToken}); err != nil {
		conn.close()
		return nil, err
	}
	go c.listen(ctx, out)
	return c, nil
}

// listen prints the agent's final transcripts and answers the decision, until the connection
// ends.
func (c *demoCallerConn) listen(ctx context.Context, out *demoPrinter) {
	defer close(c.done)
	var answer sync.WaitGroup
	defer answer.Wait()
	answered := false
	for {
		b, err := c.conn.next(ctx)
		if err != nil {
			return
		}
		f, err := frames.Decode(b)
		t, ok := f.(*frames.Transcript)
		if err != nil || !ok || !t.Final || t.Role != frames.RoleAgent {
			continue
		}
		out.line("agent", "says: %s", t.Text)
		if !answered && strings.Contains(t.Text, "7:30 or 8:15") {
			answered = true
			answer.Add(1)
			go func() {
				defer answer.Done()
				for time.Since(time.Unix(0, c.lastAudio.Load())) <= 500*time.Millisecond {
					select {
					case <-time.After(100 * time.Millisecond):
					case <-ctx.Done():
						return
					}
				}
				out.line("caller", "says: 7:30 please")
				_ = c.conn.send(ctx, &frames.CallerText{Text: "7:30 please"})
			}()
		}
	}
}

// stop hangs the caller's connection up and waits for its goroutines.
func (c *demoCallerConn) stop() {
	c.conn.close()
	<-c.done
}

// followTimeline prints the session's timeline as it happens (SPEC 16 ?follow=1).
func followTimeline(ctx context.Context, base, sessionID string, out *demoPrinter) error {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+sessionID+"/timeline?follow=1", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+demoKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e jobs.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("timeline line %q: %w", sc.Text(), err)
		}
		out.entry(e)
	}
	return sc.Err()
}

// demoPrinter prints the demo's lines, one at a time, with the time since the start.
type demoPrinter struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
}

func (p *demoPrinter) line(who, format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%6.2fs  %-9s %s\n", time.Since(p.start).Seconds(), who, fmt.Sprintf(format, a...))
}

// entry prints one timeline entry: its kind, its call, and its detail's fields in order.
func (p *demoPrinter) entry(e jobs.Entry) {
	keys := make([]string, 0, len(e.Detail))
	for k := range e.Detail {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v, _ := json.Marshal(e.Detail[k])
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	call := ""
	if e.CallID != "" {
		call = " " + e.CallID
	}
	p.line("timeline", "%s%s%s", e.Kind, call, b.String())
}
