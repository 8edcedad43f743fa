package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/internal/g711"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const key = "sk-sim"

// client is a raw Realtime client of the simulator.
type client struct {
	t  *testing.T
	ws *websocket.Conn
	n  int
}

func connect(t *testing.T, srv *Server) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer " + key}}
	ws, _, err := websocket.Dial(ctx, srv.URL()+"?model=gpt-realtime", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 24)
	t.Cleanup(func() { _ = ws.CloseNow() })
	c := &client{t: t, ws: ws}
	c.next("session.created")
	return c
}

// send sends a client event with a fresh event_id and returns the id.
func (c *client) send(ev map[string]any) string {
	c.t.Helper()
	c.n++
	id := "evt_" + strconv.Itoa(c.n)
	ev["event_id"] = id
	b, _ := json.Marshal(ev)
	if err := c.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// next reads server events until one of type typ, returning it and every event read.
func (c *client) next(typ string) (map[string]any, []map[string]any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var seen []map[string]any
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v (seen %v)", typ, err, types(seen))
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			c.t.Fatal(err)
		}
		seen = append(seen, ev)
		if ev["type"] == typ {
			return ev, seen
		}
	}
}

func types(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

func (c *client) pcmu() {
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime",
		"audio": map[string]any{"input": map[string]any{"format": map[string]any{"type": FormatPCMU}, "transcription": map[string]any{"model": "whisper-1"}},
			"output": map[string]any{"format": map[string]any{"type": FormatPCMU}}}}})
	c.next("session.updated")
}

func (c *client) audio(b []byte) {
	for len(b) > 0 {
		n := min(len(b), 160)
		c.send(map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(b[:n])})
		b = b[n:]
	}
}

func errorCode(ev map[string]any) (code, eventID string) {
	e, _ := ev["error"].(map[string]any)
	code, _ = e["code"].(string)
	eventID, _ = e["event_id"].(string)
	return code, eventID
}

func TestHandshake(t *testing.T) {
	srv := New(Options{APIKey: key})
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	ctx := context.Background()
	_, resp, err := websocket.Dial(ctx, srv.URL()+"?model=m", &websocket.DialOptions{HTTPClient: hc})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %v", err)
	}
	_, resp, err = websocket.Dial(ctx, srv.URL(), &websocket.DialOptions{HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no model: %v", err)
	}
	c := connect(t, srv)
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription"}})
	if code, _ := errorCode(first(c.next("error"))); code != "invalid_value" {
		t.Errorf("a transcription session on the realtime endpoint: %s", code)
	}
	c.send(map[string]any{"type": "no.such.event"})
	if code, _ := errorCode(first(c.next("error"))); code != "invalid_event" {
		t.Errorf("an unknown event: %s", code)
	}
}

func first(ev map[string]any, _ []map[string]any) map[string]any { return ev }

func TestOneActiveResponse(t *testing.T) {
	srv := New(Options{ChunkDelay: 5 * time.Millisecond, APIKey: key})
	defer srv.Close()
	c := connect(t, srv)
	c.pcmu()
	long := `Say something like: "` + strings.Repeat("word ", 20) + `"`
	c.send(map[string]any{"type": "response.create", "response": map[string]any{"instructions": long}})
	created, _ := c.next("response.created")
	second := c.send(map[string]any{"type": "response.create"})
	code, ref := errorCode(first(c.next("error")))
	if code != "conversation_already_has_active_response" || ref != second {
		t.Errorf("second response.create: %s (event %s)", code, ref)
	}
	done, seen := c.next("response.done")
	resp := done["response"].(map[string]any)
	if resp["id"] != created["response"].(map[string]any)["id"] || resp["status"] != "completed" {
		t.Errorf("done %v", resp)
	}
	ts := types(seen)
	if !contains(ts, "response.output_audio.delta") || !contains(ts, "response.output_audio_transcript.done") {
		t.Errorf("events %v", ts)
	}
	c.send(map[string]any{"type": "response.create"})
	c.next("response.created")
	c.next("response.done")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCancelAndTruncate(t *testing.T) {
	srv := New(Options{ChunkDelay: 10 * time.Millisecond, APIKey: key})
	defer srv.Close()
	c := connect(t, srv)
	c.pcmu()
	c.send(map[string]any{"type": "response.create", "response": map[string]any{"instructions": `Say something like: "` + strings.Repeat("word ", 30) + `"`}})
	c.next("response.output_audio.delta")
	c.send(map[string]any{"type": "response.cancel"})
	done, _ := c.next("response.done")
	resp := done["response"].(map[string]any)
	details := resp["status_details"].(map[string]any)
	if resp["status"] != "cancelled" || details["reason"] != "client_cancelled" {
		t.Errorf("done %v", resp)
	}
	again := c.send(map[string]any{"type": "response.cancel", "response_id": resp["id"]})
	if code, ref := errorCode(first(c.next("error"))); code != "response_cancel_not_active" || ref != again {
		t.Errorf("cancelling twice: %s %s", code, ref)
	}
	item := resp["output"].([]any)[0].(map[string]any)
	c.send(map[string]any{"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0, "audio_end_ms": 60_000})
	if code, _ := errorCode(first(c.next("error"))); code != "invalid_value" {
		t.Errorf("truncating beyond the audio: %s", code)
	}
	c.send(map[string]any{"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0, "audio_end_ms": 40})
	tr, _ := c.next("conversation.item.truncated")
	if tr["audio_end_ms"].(float64) != 40 {
		t.Errorf("truncated %v", tr)
	}
	ss := srv.Sessions()[0]
	for _, it := range ss.Conversation() {
		if it.ID == item["id"] && (it.AudioMS != 40 || it.Text != "" || it.Status != "incomplete") {
			t.Errorf("the truncated item %+v", it)
		}
	}
}

func TestVADTurns(t *testing.T) {
	srv := New(Options{APIKey: key})
	defer srv.Close()
	c := connect(t, srv)
	c.pcmu()
	srv.Transcribe("say hello there")
	c.audio(append(g711.Silence(100), append(g711.Tone(300, 300, 0.5), g711.Silence(600)...)...))
	started, _ := c.next("input_audio_buffer.speech_started")
	stopped, _ := c.next("input_audio_buffer.speech_stopped")
	if started["audio_start_ms"].(float64) != 100 || stopped["audio_end_ms"].(float64) != 400 || started["item_id"] != stopped["item_id"] {
		t.Errorf("speech %v → %v", started, stopped)
	}
	tr, _ := c.next("conversation.item.input_audio_transcription.completed")
	if tr["transcript"] != "say hello there" || tr["item_id"] != started["item_id"] {
		t.Errorf("transcription %v", tr)
	}
	done, _ := c.next("response.output_audio_transcript.done")
	if done["transcript"] != "hello there" {
		t.Errorf("the answer %v", done["transcript"])
	}
	c.next("response.done")

	// Noise is committed and transcribed empty, and not answered.
	c.audio(append(g711.Tone(300, 200, 0.5), g711.Silence(600)...))
	tr, _ = c.next("conversation.item.input_audio_transcription.completed")
	if tr["transcript"] != "" {
		t.Errorf("noise transcribed %v", tr["transcript"])
	}
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "system", "content": []any{map[string]any{"type": "input_text", "text": "barrier"}}}})
	_, seen := c.next("conversation.item.done")
	if contains(types(seen), "response.created") {
		t.Errorf("noise was answered: %v", types(seen))
	}
	if n := len(srv.Sessions()[0].Responses()); n != 1 {
		t.Errorf("%d responses", n)
	}
}

func TestAudioFormatIsChecked(t *testing.T) {
	srv := New(Options{APIKey: key})
	defer srv.Close()
	c := connect(t, srv)
	c.audio(g711.Silence(20))
	if code, _ := errorCode(first(c.next("error"))); code != "unsupported_format" {
		t.Errorf("audio before session.update sets audio/pcmu: %s", code)
	}
}

func TestFunctionCallsAndOutputs(t *testing.T) {
	srv := New(Options{APIKey: key})
	defer srv.Close()
	c := connect(t, srv)
	c.pcmu()
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": `call lookup {"q": 1}`}}}})
	c.send(map[string]any{"type": "response.create"})
	args, _ := c.next("response.function_call_arguments.done")
	if args["name"] != "lookup" || args["arguments"] != `{"q":1}` {
		t.Errorf("call %v", args)
	}
	c.next("response.done")
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "function_call_output", "call_id": "call_nope", "output": "x"}})
	if code, _ := errorCode(first(c.next("error"))); code != "invalid_value" {
		t.Errorf("an output for no call: %s", code)
	}
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "function_call_output", "call_id": args["call_id"], "output": `{"error":"down"}`}})
	c.send(map[string]any{"type": "response.create"})
	done, _ := c.next("response.output_audio_transcript.done")
	if done["transcript"] != "lookup failed: down" {
		t.Errorf("said %v", done["transcript"])
	}
}

func TestFaults(t *testing.T) {
	srv := New(Options{APIKey: key})
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	opts := &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}}
	srv.Refuse(http.StatusServiceUnavailable)
	_, resp, err := websocket.Dial(context.Background(), srv.URL()+"?model=m", opts)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("refused: %v", err)
	}
	srv.Refuse(0)
	c := connect(t, srv)
	srv.RejectItems("function_call")
	id := c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}})
	if code, eventID := errorCode(first(c.next("error"))); code != "invalid_value" || eventID != id {
		t.Errorf("a rejected item: %s for %s", code, eventID)
	}
	ss := srv.Sessions()[0]
	done := make(chan struct{})
	go func() {
		defer close(done)
		ss.Disconnect(int(websocket.StatusGoingAway), "bye")
	}()
	_, _, err = c.ws.Read(context.Background())
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after Disconnect: %v", err)
	}
	<-done
	srv.Close()
	_, resp, err = websocket.Dial(context.Background(), srv.URL()+"?model=m", opts)
	if err == nil {
		t.Errorf("a dial after Close was accepted (%v)", resp)
	}
}
