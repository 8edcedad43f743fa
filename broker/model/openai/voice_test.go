package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/broker/voicetest"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestVoiceScenarios runs the broker's voice scenario table (SPEC 8, 9, 11, 12) with the
// adapter as the session's model, connected to the simulator, over the memory store. Every
// event of every session is then checked against the published schema.
func TestVoiceScenarios(t *testing.T) {
	srv := sim.New(sim.Options{APIKey: testKey})
	t.Cleanup(func() {
		srv.Close()
		checkEvents(t, srv.Events())
		if n := countErrors(srv, codeActiveResponse); n > 0 {
			t.Errorf("the adapter provoked %s %d times", codeActiveResponse, n)
		}
	})
	newModel := New(Options{URL: srv.URL(), APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	voicetest.Run(t, "memory", newModel, false)
}

// peer is a raw WebSocket connection to the broker (a host or a caller): it keeps the JSON
// frames it receives and drops the caller's audio, noting when the last of it came.
type peer struct {
	t         *testing.T
	ws        *websocket.Conn
	mu        sync.Mutex
	frames    []map[string]any
	lastAudio time.Time
	changed   chan struct{}
	done      chan struct{}
}

func dialPeer(t *testing.T, url string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	p := &peer{t: t, ws: ws, changed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			typ, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				p.mu.Lock()
				p.lastAudio = time.Now()
				p.mu.Unlock()
				continue
			}
			var f map[string]any
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			p.mu.Lock()
			p.frames = append(p.frames, f)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ws.CloseNow()
		<-p.done
	})
	return p
}

func (p *peer) send(v map[string]any) {
	p.t.Helper()
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := p.ws.Write(ctx, websocket.MessageText, b); err != nil {
		p.t.Fatal(err)
	}
}

// wait returns the first frame (from the start) that ok matches, waiting for it.
func (p *peer) wait(what string, ok func(map[string]any) bool) map[string]any {
	p.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		p.mu.Lock()
		for _, f := range p.frames {
			if ok(f) {
				p.mu.Unlock()
				return f
			}
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			p.t.Fatalf("no %s; frames: %v", what, p.all())
		}
	}
}

// waitQuiet waits until no agent audio has come for d (at most 20 s).
func (p *peer) waitQuiet(d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.mu.Lock()
		last := p.lastAudio
		p.mu.Unlock()
		if time.Since(last) >= d {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatal("the agent's audio never stopped")
		}
		time.Sleep(d / 4)
	}
}

func (p *peer) all() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.frames...)
}

// frameOf matches frames of type typ whose string members equal kv (key, value, …).
func frameOf(typ string, kv ...string) func(map[string]any) bool {
	return func(f map[string]any) bool {
		if f["type"] != typ {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if s, _ := f[kv[i]].(string); s != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// TestVoiceCompletionRetriedAfterDrop runs a real broker with the adapter as its model: a
// completion being spoken when the model connection drops is a failed attempt (model_error),
// retried as attempt 2 and delivered after the reconnect; the timeline shows the drop and the
// reconnect.
func TestVoiceCompletionRetriedAfterDrop(t *testing.T) {
	srv := sim.New(sim.Options{APIKey: testKey, ChunkDelay: 50 * time.Millisecond})
	t.Cleanup(func() {
		srv.Close()
		checkEvents(t, srv.Events())
	})
	newModel := New(Options{URL: srv.URL(), APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	b := brokertest.Start(t, brokertest.Options{Config: broker.Config{
		Models: map[string]model.Factory{"openai": newModel}, DefaultModel: "openai"}})

	host := dialPeer(t, b.WSURL)
	host.send(map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "host", "api_key": brokertest.KeyA, "id": "h1",
		"tools": []map[string]any{{"name": "slow", "description": "Runs in the background.", "parameters": map[string]any{"type": "object"}, "deferred": true}}})
	w := host.wait("the host's welcome", frameOf("welcome"))
	host.wait("tools.declared", frameOf("tools.declared", "ref", "h1"))
	sid, _ := w["session_id"].(string)
	join, _ := w["join_token"].(string)
	caller := dialPeer(t, b.WSURL)
	caller.send(map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "caller", "session_id": sid, "join_token": join})
	caller.wait("the caller's welcome", frameOf("welcome"))

	caller.send(map[string]any{"type": "caller.text", "text": "call slow {}"})
	tc := host.wait("the tool call", frameOf("tool_call", "name", "slow"))
	callID, _ := tc["call_id"].(string)
	host.send(map[string]any{"type": "tool_deferred", "id": "d1", "call_id": callID, "handle": "h-report", "status_label": "report"})
	host.wait("the defer's ack", frameOf("tool_deferred_ack", "call_id", callID))
	caller.wait("the hand-off", func(f map[string]any) bool {
		return f["type"] == "transcript" && f["role"] == "agent" && f["final"] == true && f["text"] == "Started report in the background."
	})
	output := words(6)
	host.send(map[string]any{"type": "tool_result", "handle": "h-report", "output": output})

	speaking := host.wait("the completion speaking", frameOf("tool_job_narration", "call_id", callID, "kind", "completion", "state", "speaking"))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	first, err := srv.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first.Drop()

	failed := host.wait("attempt 1 failed", frameOf("tool_job_narration", "call_id", callID, "kind", "completion", "state", "failed"))
	if failed["attempt"] != 1.0 || failed["response_id"] != speaking["response_id"] {
		t.Errorf("failed %v after speaking %v", failed, speaking)
	}
	delivered := host.wait("the completion delivered", frameOf("tool_job_narration", "call_id", callID, "kind", "completion", "state", "delivered"))
	if delivered["attempt"] != 2.0 {
		t.Errorf("delivered %v, want attempt 2", delivered)
	}
	rid, _ := delivered["response_id"].(string)
	if _, err := srv.Session(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tr := caller.wait("the completion's transcript", func(f map[string]any) bool {
		return f["type"] == "transcript" && f["role"] == "agent" && f["final"] == true && f["response_id"] == rid
	})
	if want := "report is done: " + output; tr["text"] != want {
		t.Errorf("said %q, want %q", tr["text"], want)
	}
	var states []string
	for _, f := range host.all() {
		if f["type"] == "tool_job_narration" && f["kind"] == "completion" {
			states = append(states, fmt.Sprintf("%s/%v", f["state"], f["attempt"]))
		}
		if f["type"] == "tool_job_delivery_failed" {
			t.Errorf("delivery failed: %v", f)
		}
	}
	if got := strings.Join(states, " "); got != "queued/1 speaking/1 failed/1 queued/2 speaking/2 delivered/2" {
		t.Errorf("completion narration %s", got)
	}

	// The timeline shows the drop and the reconnect as notices.
	var notices []string
	deadline := time.Now().Add(waitFor)
	for {
		notices = notices[:0]
		for _, e := range timeline(t, b, sid) {
			if e.Kind == "notice" {
				msg, _ := e.Detail["error"].(string)
				notices = append(notices, msg)
			}
		}
		if len(notices) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(notices) != 2 || !strings.Contains(notices[0], "was lost") || !strings.HasPrefix(notices[1], "openai: reconnected") {
		t.Errorf("notices %q, want the drop and the reconnect", notices)
	}
	host.send(map[string]any{"type": "session.end"})
	host.wait("session.ended", frameOf("session.ended"))
}

// timelineEntry is one entry of a session's timeline.
type timelineEntry struct {
	Kind   string         `json:"kind"`
	Detail map[string]any `json:"detail"`
}

// timeline reads a session's timeline.
func timeline(t *testing.T, b *brokertest.Broker, sid string) []timelineEntry {
	t.Helper()
	req, _ := http.NewRequest("GET", b.URL+"/v1/sessions/"+sid+"/timeline", nil)
	req.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: waitFor}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Entries []timelineEntry `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("timeline: status %d: %v", resp.StatusCode, err)
	}
	return doc.Entries
}
