package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/broker/voicetest"
	"github.com/backchannel-io/backchannel/broker/wiretest"
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

// frameWait bounds each wait for a broker frame in these tests: speech through the simulator,
// and a reconnect, take real time.
const frameWait = 20 * time.Second

// voiceSession attaches a host declaring tools (hello members) and a caller through b, and
// returns both connections and the session id.
func voiceSession(t *testing.T, b *brokertest.Broker, tools []map[string]any) (host, caller *wiretest.Conn, sid string) {
	t.Helper()
	host = wiretest.Dial(t, b.WSURL, "host")
	w := host.Hello(map[string]any{"role": "host", "api_key": brokertest.KeyA, "id": "h1", "tools": tools})
	if w.Type != "welcome" {
		t.Fatalf("host hello: %s", w)
	}
	host.Expect(wiretest.TypeWith("tools.declared", "ref", "h1"))
	sid = w.Str("session_id")
	caller = wiretest.Dial(t, b.WSURL, "caller")
	if w := caller.Hello(map[string]any{"role": "caller", "session_id": sid, "join_token": w.Str("join_token")}); w.Type != "welcome" {
		t.Fatalf("caller hello: %s", w)
	}
	return host, caller, sid
}

// agentSaid matches the caller's final agent transcript of text ("" for any).
func agentSaid(text string) wiretest.Match {
	return func(f wiretest.Frame) bool {
		return f.Type == "transcript" && f.Str("role") == "agent" && f.Bool("final") && (text == "" || f.Str("text") == text)
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

	host, caller, sid := voiceSession(t, b, []map[string]any{{"name": "slow", "description": "Runs in the background.",
		"parameters": map[string]any{"type": "object"}, "deferred": true}})

	caller.Send(map[string]any{"type": "caller.text", "text": "call slow {}"})
	tc := host.ExpectWithin(frameWait, wiretest.TypeWith("tool_call", "name", "slow"))
	callID := tc.Str("call_id")
	host.Send(map[string]any{"type": "tool_deferred", "id": "d1", "call_id": callID, "handle": "h-report", "status_label": "report"})
	host.ExpectWithin(frameWait, wiretest.TypeWith("tool_deferred_ack", "call_id", callID))
	caller.ExpectWithin(frameWait, agentSaid("Started report in the background."))
	output := words(6)
	host.Send(map[string]any{"type": "tool_result", "handle": "h-report", "output": output})

	narration := func(state string) wiretest.Match {
		return wiretest.TypeWith("tool_job_narration", "call_id", callID, "kind", "completion", "state", state)
	}
	speaking := host.ExpectWithin(frameWait, narration("speaking"))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	first, err := srv.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first.Drop()

	failed := host.ExpectWithin(frameWait, narration("failed"))
	if failed.Int("attempt") != 1 || failed.Str("response_id") != speaking.Str("response_id") {
		t.Errorf("failed %s after speaking %s", failed, speaking)
	}
	delivered := host.ExpectWithin(frameWait, narration("delivered"))
	if delivered.Int("attempt") != 2 {
		t.Errorf("delivered %s, want attempt 2", delivered)
	}
	rid := delivered.Str("response_id")
	if _, err := srv.Session(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tr := caller.ExpectWithin(frameWait, func(f wiretest.Frame) bool { return agentSaid("")(f) && f.Str("response_id") == rid })
	if want := "report is done: " + output; tr.Str("text") != want {
		t.Errorf("said %q, want %q", tr.Str("text"), want)
	}
	var states []string
	for _, f := range host.History() {
		if f.Type == "tool_job_narration" && f.Str("kind") == "completion" {
			states = append(states, fmt.Sprintf("%s/%d", f.Str("state"), f.Int("attempt")))
		}
		if f.Type == "tool_job_delivery_failed" {
			t.Errorf("delivery failed: %s", f)
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
	host.Send(map[string]any{"type": "session.end"})
	host.ExpectWithin(frameWait, "session.ended")
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
