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
	out := &demoPrinter{w: w, start: time.Now()}
	out.line("broker", "listening on %s (memory store, scripted model)", base)

	done := make(chan string, 1) // the completion's narration state
	host, err := backchannel.Connect(ctx, backchannel.Options{
		URL: base, APIKey: demoKey, Logger: log,
		Tools: []backchannel.Tool{{Decl: demoTool, Handler: demoHandler(out)}},
		OnEvent: func(e backchannel.Event) {
			if n, ok := e.Frame.(*frames.ToolJobNarration); ok && n.Kind == frames.NarrationCompletion &&
				(n.State == frames.NarrationDelivered || n.State == "failed") {
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

	caller, err := dialDemoCaller(ctx, base, host.SessionID(), host.JoinToken())
	if err != nil {
		return fmt.Errorf("caller: %w", err)
	}
	defer caller.CloseNow()
	go demoCaller(ctx, caller, out)
	out.line("caller", `says: call book_table {"party":4}`)
	if err := sendJSON(ctx, caller, map[string]any{"type": "caller.text", "text": `call book_table {"party":4}`}); err != nil {
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
			step := func(d time.Duration) { time.Sleep(d) }
			step(500 * time.Millisecond)
			_ = job.Progress(ctx, "calling the restaurant")
			step(time.Second)
			_ = job.Milestone(ctx, "the restaurant picked up")
			step(1500 * time.Millisecond)
			_ = job.Milestone(ctx, "they have two tables left")
			step(500 * time.Millisecond)
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
			step(time.Second)
			if err := job.Result(ctx, map[string]any{"party": 4, "time": a.Option, "confirmation": "T-4711"}); err != nil {
				out.line("host", "result failed: %v", err)
			}
		}()
		return nil, nil
	}
}

// startDemoBroker runs a broker with the memory store and the scripted model on addr.
func startDemoBroker(ctx context.Context, addr string, log *slog.Logger) (string, func(), error) {
	node := broker.NewNode(broker.Config{APIKeys: map[string]string{demoKey: "demo"}, Logger: log,
		DefaultModel: "scripted", Models: map[string]model.Factory{"scripted": scripted.New}}, memstore.New(nil))
	wsh := ws.NewHandler(node, ws.Options{Logger: log})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: node.Handler(wsh, routes), ReadHeaderTimeout: 10 * time.Second}
	runCtx, cancelRun := context.WithCancel(ctx)
	go func() { _ = node.Run(runCtx) }()
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = node.Shutdown(sctx, true)
		wsh.CloseAll(int(websocket.StatusGoingAway), "demo over")
		_ = srv.Shutdown(sctx)
		_ = wsh.Wait(sctx)
		cancelRun()
	}
	return "http://" + displayAddr(ln.Addr()), stop, nil
}

// dialDemoCaller attaches the scripted caller to the session with its join token.
func dialDemoCaller(ctx context.Context, base, sessionID, joinToken string) (*websocket.Conn, error) {
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/ws", nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(16 << 20)
	if err := sendJSON(ctx, c, map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "caller",
		"session_id": sessionID, "join_token": joinToken}); err != nil {
		return nil, err
	}
	return c, nil
}

// demoCaller prints what the caller hears and answers the decision once the agent has asked
// it and fallen silent.
func demoCaller(ctx context.Context, c *websocket.Conn, out *demoPrinter) {
	answered := false
	var mu sync.Mutex
	lastAudio := time.Now()
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText { // the agent's audio, 20 ms a frame in real time
			mu.Lock()
			lastAudio = time.Now()
			mu.Unlock()
			continue
		}
		var f struct {
			Type  string `json:"type"`
			Role  string `json:"role"`
			Text  string `json:"text"`
			Final bool   `json:"final"`
		}
		if json.Unmarshal(data, &f) != nil || f.Type != "transcript" || !f.Final || f.Role != "agent" {
			continue
		}
		out.line("agent", "says: %s", f.Text)
		if !answered && strings.Contains(f.Text, "7:30 or 8:15") {
			answered = true
			go func() {
				for {
					time.Sleep(100 * time.Millisecond)
					mu.Lock()
					quiet := time.Since(lastAudio)
					mu.Unlock()
					if quiet > 500*time.Millisecond {
						break
					}
				}
				out.line("caller", "says: 7:30 please")
				_ = sendJSON(ctx, c, map[string]any{"type": "caller.text", "text": "7:30 please"})
			}()
		}
	}
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

// sendJSON writes one JSON text message.
func sendJSON(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}
