package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// session waits for the simulator's i-th session (from 0).
func (h *harness) session(t testing.TB, i int) *sim.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	s, err := h.srv.Session(ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// isLost matches the Error event of a drop.
func isLost(e ev) bool {
	return e.kind == "error" && errors.Is(e.err, ErrConnectionLost) && strings.HasSuffix(e.err.Error(), "; reconnecting")
}

// reconnectedEvents are the Reconnected notices so far.
func (r *recorder) reconnected() []*Reconnected {
	var out []*Reconnected
	for _, e := range r.errors() {
		var rc *Reconnected
		if errors.As(e.err, &rc) {
			out = append(out, rc)
		}
	}
	return out
}

// waitReconnected waits for the n-th Reconnected notice (from 1).
func (r *recorder) waitReconnected(t testing.TB, n int) *Reconnected {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if rcs := r.reconnected(); len(rcs) >= n {
			return rcs[n-1]
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for reconnect %d; events: %v", n, r.all())
		}
	}
}

// systemTexts are the texts of a session's system messages, in order.
func systemTexts(s *sim.Session) []string {
	var out []string
	for _, it := range s.Conversation() {
		if it.Type == "message" && it.Role == "system" {
			out = append(out, it.Text)
		}
	}
	return out
}

// items are a session's items of type typ.
func items(s *sim.Session, typ string) []sim.Item {
	var out []sim.Item
	for _, it := range s.Conversation() {
		if it.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// sessionEvents counts the events of type typ the adapter sent to session i.
func sessionEvents(srv *sim.Server, i int, typ string) int {
	n := 0
	for _, e := range srv.Events() {
		if e.Session == i && e.Dir == sim.ClientToServer && e.Type == typ {
			n++
		}
	}
	return n
}

var lookupTool = model.Tool{Name: "lookup", Description: "Look something up.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}

// TestReconnectWhileIdle: a connection dropped while nothing is said is re-established; the
// new session gets the same configuration (one session.update: formats, VAD with the current
// auto-respond, transcription, instructions, voice, tools) and the same context items in
// order, and works.
func TestReconnectWhileIdle(t *testing.T) {
	h := start(t, setup{cfg: model.Config{Instructions: "You book trains.", Voice: "marin"}})
	h.m.SetTools([]model.Tool{lookupTool, model.CancelJobTool})
	h.m.SetAutoRespond(false)
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:\n- trip: book (trip), deferred"})
	h.m.SetContext(model.ContextItem{ID: "progress:call_1", Text: "Progress of trip (trip): 50%"})
	h.m.SetContext(model.ContextItem{ID: "interaction:ia_1", Text: "Caller answered ia_1: window"})
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:\n- trip: book (trip), running"})
	h.barrier(t)
	before := h.sess.Config()
	wantItems := systemTexts(h.sess)
	if len(wantItems) != 4 {
		t.Fatalf("context items before the drop: %q", wantItems)
	}

	h.sess.Drop()
	h.rec.wait(t, "the drop", isLost)
	rc := h.rec.waitReconnected(t, 1)
	if rc.Attempts != 1 || rc.ContextItems != 4 || rc.Calls != 0 || !strings.HasPrefix(rc.Error(), "openai: reconnected") {
		t.Errorf("reconnected %+v: %v", rc, rc)
	}
	s2 := h.session(t, 1)
	eventually(t, "the context items are restored", func() bool { return len(systemTexts(s2)) == 4 })
	if got := systemTexts(s2); !slices.Equal(got, wantItems) {
		t.Errorf("restored context items %q, want %q in this order", got, wantItems)
	}
	c := s2.Config()
	if c.Updates != 1 {
		t.Errorf("%d session.update on the new session, want one", c.Updates)
	}
	if c.Instructions != before.Instructions || !strings.HasPrefix(c.Instructions, "You book trains.") {
		t.Errorf("instructions %q, want %q", c.Instructions, before.Instructions)
	}
	if c.InputFormat != sim.FormatPCMU || c.OutputFormat != sim.FormatPCMU || c.Voice != "marin" ||
		c.TranscriptionModel != DefaultTranscriptionModel || c.TurnDetection != "server_vad" || !c.InterruptResponse {
		t.Errorf("restored configuration %+v", c)
	}
	if c.CreateResponse {
		t.Error("auto-respond was off before the drop, on after it")
	}
	if got := strings.Join(c.ToolNames(), ","); got != "lookup,cancel_job" || string(c.ToolChoice) != `"auto"` {
		t.Errorf("restored tools %s, choice %s", got, c.ToolChoice)
	}
	for i, tool := range c.Tools {
		if string(tool.Parameters) != string(before.Tools[i].Parameters) || tool.Description != before.Tools[i].Description {
			t.Errorf("tool %s restored as %+v, was %+v", tool.Name, tool, before.Tools[i])
		}
	}

	// It works: a narration, and a replaced context item replaces the restored one.
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "Back again."})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.rec.finalTranscript(t, id); got != "Back again." {
		t.Errorf("said %q", got)
	}
	if d := h.rec.waitDone(t, id); d.err != nil || d.cancelled {
		t.Errorf("done %v", d)
	}
	if rs := s2.Responses(); len(rs) != 1 || rs[0].ID != id {
		t.Errorf("responses of the new session %+v", rs)
	}
	h.m.SetContext(model.ContextItem{ID: "progress:call_1", Text: "Progress of trip (trip): 90%"})
	eventually(t, "the item is replaced", func() bool {
		got := systemTexts(s2)
		return len(got) == 4 && got[3] == "Progress of trip (trip): 90%"
	})
	if n := len(h.rec.errors()); n != 2 {
		t.Errorf("errors %v, want the drop and the reconnect", h.rec.errors())
	}
	if n := len(h.rec.of("done", "")); n != 1 {
		t.Errorf("%d responses reported done, want only the new one", n)
	}
}

// TestReconnectAfterCloseFrame: the server closing the connection (a close frame) is a drop
// too.
func TestReconnectAfterCloseFrame(t *testing.T) {
	h := start(t, setup{})
	h.sess.Disconnect(1011, "internal error")
	lost := h.rec.wait(t, "the drop", isLost)
	if !strings.Contains(lost.err.Error(), "internal error") {
		t.Errorf("the drop does not say why: %v", lost.err)
	}
	h.rec.waitReconnected(t, 1)
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "Still here."})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.rec.finalTranscript(t, id); got != "Still here." {
		t.Errorf("said %q", got)
	}
}

// TestReconnectAfterStalledWrite: a connection whose client events pile up beyond the bound
// is given up and redialled like any drop.
func TestReconnectAfterStalledWrite(t *testing.T) {
	h := start(t, setup{opts: Options{SendQueueBytes: 32 << 10}})
	h.m.CallerTurn("say "+strings.Repeat("x", 64<<10), nil)
	lost := h.rec.wait(t, "the drop", isLost)
	if !errors.Is(lost.err, errStalled) {
		t.Errorf("the drop does not say why: %v", lost.err)
	}
	h.rec.waitReconnected(t, 1)
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "Go on."})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.rec.finalTranscript(t, id); got != "Go on." {
		t.Errorf("said %q", got)
	}
}

// TestDropEndsCallerSpeech: caller speech in progress when the connection drops is reported
// stopped, so the broker's floor does not wait for an end the new session never saw.
func TestDropEndsCallerSpeech(t *testing.T) {
	h := start(t, setup{})
	tone := g711.Tone(300, 200, 0.5)
	for len(tone) > 0 {
		n := min(len(tone), g711.SamplesPer20ms)
		h.m.CallerAudio(tone[:n])
		tone = tone[n:]
	}
	h.rec.waitKind(t, "speech_started", "")
	h.sess.Drop()
	h.rec.waitKind(t, "speech_stopped", "")
	h.rec.waitReconnected(t, 1)
	var order []string
	for _, e := range h.rec.all() {
		if e.kind != "audio" {
			order = append(order, e.kind)
		}
	}
	if got := strings.Join(order, ","); got != "speech_started,error,speech_stopped,error" {
		t.Errorf("events %s", got)
	}
}

// TestReconnectDuringResponse: the response being spoken when the connection drops is
// reported failed (not lost), and a new response works after the reconnect.
func TestReconnectDuringResponse(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 20 * time.Millisecond}})
	id, err := h.m.Respond(model.Request{Kind: model.Completion, Label: "report", Name: "report", State: "completed", Output: json.RawMessage(`"` + words(30) + `"`)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitKind(t, "audio", id)
	h.sess.Drop()
	done := h.rec.waitDone(t, id)
	if done.cancelled || !errors.Is(done.err, ErrConnectionLost) || !strings.Contains(done.err.Error(), id) {
		t.Errorf("done %v, want failed by the drop", done)
	}
	h.rec.waitReconnected(t, 1)
	// The broker cuts what it still plays: nothing of the old conversation is addressed.
	h.m.Cancel(id)
	id2, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "Let me say that again."})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.rec.finalTranscript(t, id2); got != "Let me say that again." {
		t.Errorf("said %q", got)
	}
	if d := h.rec.waitDone(t, id2); d.err != nil || d.cancelled {
		t.Errorf("done %v", d)
	}
	if n := sessionEvents(h.srv, 1, "response.cancel") + sessionEvents(h.srv, 1, "conversation.item.truncate"); n != 0 {
		t.Errorf("%d cancel/truncate events on the new session for a response of the old one", n)
	}
	// The lost response's events stop at its failure.
	dones := h.rec.of("done", id)
	if len(dones) != 1 {
		t.Errorf("ResponseDone of %s reported %d times", id, len(dones))
	}
}

// TestReconnectFailsQueuedResponses: requested responses queued behind the active one when
// the connection drops are reported failed too — Respond returns them an id of the adapter's
// own, started and failed at once — and are not sent again.
func TestReconnectFailsQueuedResponses(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 20 * time.Millisecond}})
	active, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(30)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitKind(t, "audio", active)
	var wg sync.WaitGroup
	ids := make([]string, 2)
	errs := make([]error, 2)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = h.m.Respond(model.Request{Kind: model.Completion, Label: "job", Name: "job", State: "completed", Output: json.RawMessage(`"done"`)})
		}()
	}
	eventually(t, "two requests are queued", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return len(h.m.resp.queue) == 2
	})
	h.sess.Drop()
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || !strings.HasPrefix(ids[i], LostResponsePrefix) {
			t.Fatalf("Respond %d: %q, %v; want an id of the adapter's own", i, ids[i], errs[i])
		}
	}
	for _, id := range append([]string{active}, ids...) {
		done := h.rec.waitDone(t, id)
		if done.cancelled || !errors.Is(done.err, ErrConnectionLost) {
			t.Errorf("%s: done %v, want failed by the drop", id, done)
		}
		if len(h.rec.of("started", id)) != 1 {
			t.Errorf("%s: started reported %d times", id, len(h.rec.of("started", id)))
		}
	}
	h.rec.waitReconnected(t, 1)
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "Next."})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitDone(t, id)
	if rs := h.session(t, 1).Responses(); len(rs) != 1 || rs[0].ID != id {
		t.Errorf("responses of the new session %+v: the failed requests were sent again", rs)
	}
}

// TestReconnectToolResultOfAnOldCall: a call of the model made before the drop is re-created
// on the new session; its result answers it with a function_call_output, spoken about.
func TestReconnectToolResultOfAnOldCall(t *testing.T) {
	h := start(t, setup{})
	h.m.SetTools([]model.Tool{lookupTool})
	h.m.CallerTurn(`call lookup {"q":"weather"}`, nil)
	call := h.rec.waitKind(t, "tool_call", "")
	h.rec.waitDone(t, "")
	h.sess.Drop()
	rc := h.rec.waitReconnected(t, 1)
	if rc.Calls != 1 {
		t.Errorf("reconnected %+v, want the pending call restored", rc)
	}
	s2 := h.session(t, 1)
	h.m.ToolResult(call.callID, `{"temp":21}`, false, true)
	r := h.rec.wait(t, "the result response", func(e ev) bool { return e.kind == "transcript" && e.final })
	if r.text != `lookup returned: {"temp":21}` {
		t.Errorf("said %q", r.text)
	}
	calls, outputs := items(s2, "function_call"), items(s2, "function_call_output")
	if len(calls) != 1 || calls[0].CallID != call.callID || calls[0].Name != "lookup" || calls[0].Arguments != `{"q":"weather"}` {
		t.Errorf("restored calls %+v", calls)
	}
	if len(outputs) != 1 || outputs[0].CallID != call.callID || outputs[0].Output != `{"temp":21}` {
		t.Errorf("outputs %+v", outputs)
	}
	// An answered call is not restored again.
	h.rec.waitDone(t, r.id)
	s2.Drop()
	if rc := h.rec.waitReconnected(t, 2); rc.Calls != 0 {
		t.Errorf("second reconnect %+v: an answered call was restored", rc)
	}
	if n := len(h.rec.errors()); n != 4 {
		t.Errorf("errors %v", h.rec.errors())
	}
}

// TestReconnectToolResultAsContext: when the new conversation does not hold the old call
// (the server refused to re-create it), its output goes in as a system message naming the
// call instead of failing.
func TestReconnectToolResultAsContext(t *testing.T) {
	h := start(t, setup{})
	h.m.SetTools([]model.Tool{lookupTool})
	h.m.CallerTurn(`call lookup {"q":"trains"}`, nil)
	call := h.rec.waitKind(t, "tool_call", "")
	h.rec.waitDone(t, "")
	h.srv.RejectItems("function_call")
	h.sess.Drop()
	h.rec.waitReconnected(t, 1)
	eventually(t, "the refused call is known", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		pc := h.m.calls.find(call.callID)
		return pc != nil && !pc.inConversation
	})
	s2 := h.session(t, 1)
	h.sess = s2
	h.m.ToolResult(call.callID, "3 trains", false, false)
	eventually(t, "the output arrives as context", func() bool {
		for _, text := range systemTexts(s2) {
			if strings.Contains(text, call.callID) && strings.Contains(text, "lookup") && strings.HasSuffix(text, ": 3 trains") {
				return true
			}
		}
		return false
	})
	if n := len(items(s2, "function_call_output")); n != 0 {
		t.Errorf("%d function_call_output for a call the conversation does not hold", n)
	}
	h.barrier(t)
	if n := len(h.rec.errors()); n != 2 {
		t.Errorf("errors %v, want the drop and the reconnect", h.rec.errors())
	}
}

// TestCommandsWhileReconnecting: while the server refuses the redials, the state commands
// change what is restored, caller turns and tool results wait for the new session, and caller
// audio is dropped.
func TestCommandsWhileReconnecting(t *testing.T) {
	h := start(t, setup{opts: Options{ReconnectInterval: 20 * time.Millisecond}})
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:\n- a: lookup (a), pending"})
	h.m.CallerTurn(`call lookup {"q":"x"}`, nil)
	call := h.rec.waitKind(t, "tool_call", "")
	h.rec.waitDone(t, "")
	h.srv.Refuse(http.StatusServiceUnavailable)
	h.sess.Drop()
	h.rec.wait(t, "the drop", isLost)
	h.m.SetTools([]model.Tool{lookupTool})
	h.m.SetAutoRespond(false)
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:"})
	h.m.SetContext(model.ContextItem{ID: "note", Text: "A note."})
	h.m.ToolResult(call.callID, "found", false, false)
	h.m.CallerAudio(make([]byte, 160))
	h.m.Cancel("resp_x")
	h.m.CallerTurn("say hello there", nil)
	time.Sleep(100 * time.Millisecond) // a few refused dials
	h.srv.Refuse(0)
	rc := h.rec.waitReconnected(t, 1)
	if rc.Attempts < 2 {
		t.Errorf("reconnected %+v, want several dials", rc)
	}
	answer := h.rec.wait(t, "the answer to the deferred turn", func(e ev) bool { return e.kind == "transcript" && e.final })
	if answer.text != "hello there" {
		t.Errorf("the deferred turn was answered %q", answer.text)
	}
	s2 := h.session(t, 1)
	if got := systemTexts(s2); !slices.Equal(got, []string{"Open jobs:", "A note."}) {
		t.Errorf("context items %q", got)
	}
	c := s2.Config()
	if c.CreateResponse || strings.Join(c.ToolNames(), ",") != "lookup" || c.Updates != 1 {
		t.Errorf("configuration %+v", c)
	}
	var kinds []string
	for _, it := range s2.Conversation() {
		if it.Type != "message" || it.Role != "system" {
			kinds = append(kinds, it.Type+"/"+it.Role)
		}
	}
	if got := strings.Join(kinds, " "); got != "function_call/ function_call_output/ message/user message/assistant" {
		t.Errorf("conversation %s", got)
	}
	if out := items(s2, "function_call_output"); len(out) != 1 || out[0].CallID != call.callID || out[0].Output != "found" {
		t.Errorf("outputs %+v", out)
	}
	if n := sessionEvents(h.srv, 1, "input_audio_buffer.append") + sessionEvents(h.srv, 1, "response.cancel"); n != 0 {
		t.Errorf("%d audio or cancel events reached the new session", n)
	}
}

// TestRespondWhileReconnecting: a Respond given while the adapter reconnects waits and is
// sent on the new connection.
func TestRespondWhileReconnecting(t *testing.T) {
	h := start(t, setup{opts: Options{ReconnectInterval: 20 * time.Millisecond}})
	h.srv.Refuse(http.StatusServiceUnavailable)
	h.sess.Drop()
	h.rec.wait(t, "the drop", isLost)
	type result struct {
		id  string
		err error
	}
	got := make(chan result, 1)
	go func() {
		id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "Sorry for the wait."})
		got <- result{id, err}
	}()
	time.Sleep(100 * time.Millisecond)
	h.srv.Refuse(0)
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if said := h.rec.finalTranscript(t, r.id); said != "Sorry for the wait." {
		t.Errorf("said %q", said)
	}
	if rs := h.session(t, 1).Responses(); len(rs) != 1 || rs[0].ID != r.id {
		t.Errorf("responses %+v", rs)
	}
}

// TestRespondTimesOutWhileReconnecting: a Respond that waits longer than RespondTimeout for
// the connection fails, and its request is not sent later.
func TestRespondTimesOutWhileReconnecting(t *testing.T) {
	h := start(t, setup{opts: Options{ReconnectInterval: 20 * time.Millisecond, RespondTimeout: 150 * time.Millisecond}})
	h.srv.Refuse(http.StatusServiceUnavailable)
	h.sess.Drop()
	h.rec.wait(t, "the drop", isLost)
	_, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "too late"})
	if !errors.Is(err, ErrRespondTimeout) || !strings.Contains(err.Error(), "reconnecting") {
		t.Fatalf("err = %v", err)
	}
	h.srv.Refuse(0)
	h.rec.waitReconnected(t, 1)
	h.sess = h.session(t, 1)
	h.barrier(t)
	if rs := h.session(t, 1).Responses(); len(rs) != 0 {
		t.Errorf("responses %+v: the abandoned request was sent", rs)
	}
}

// TestReconnectGivesUp: a server that is gone for good is redialled until the bound passes;
// then the model reports Error and stays closed.
func TestReconnectGivesUp(t *testing.T) {
	const bound = 400 * time.Millisecond
	h := start(t, setup{sim: sim.Options{ChunkDelay: 20 * time.Millisecond},
		opts: Options{ReconnectTimeout: bound, ReconnectInterval: 20 * time.Millisecond}})
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(30)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitKind(t, "audio", id)
	begin := time.Now()
	h.srv.Close()
	if d := h.rec.waitDone(t, id); !errors.Is(d.err, ErrConnectionLost) {
		t.Errorf("done %v", d)
	}
	// A Respond while the adapter still tries fails when it gives up.
	waiting := make(chan error, 1)
	go func() {
		_, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "never"})
		waiting <- err
	}()
	gaveUp := h.rec.wait(t, "giving up", func(e ev) bool {
		return e.kind == "error" && strings.Contains(e.err.Error(), "could not be re-established")
	})
	elapsed := time.Since(begin)
	if !errors.Is(gaveUp.err, ErrConnectionLost) || elapsed > bound+3*time.Second {
		t.Errorf("gave up after %v: %v", elapsed, gaveUp.err)
	}
	if err := <-waiting; !errors.Is(err, ErrConnectionLost) {
		t.Errorf("the waiting Respond: %v", err)
	}
	t0 := time.Now()
	if _, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "hi"}); !errors.Is(err, ErrConnectionLost) || time.Since(t0) > time.Second {
		t.Errorf("Respond after giving up: %v", err)
	}
	h.m.CallerAudio([]byte{1, 2, 3})
	h.m.CallerTurn("hello", nil)
	h.m.SetContext(model.ContextItem{ID: "x", Text: "y"})
	h.m.ToolResult("c", "o", false, true)
	h.m.SetTools(nil)
	h.m.SetAutoRespond(false)
	h.m.Cancel("r")
	n := len(h.rec.all())
	time.Sleep(100 * time.Millisecond)
	if got := len(h.rec.all()); got != n {
		t.Errorf("%d events after giving up", got-n)
	}
	if len(h.rec.reconnected()) != 0 || len(h.rec.errors()) != 2 {
		t.Errorf("errors %v, want the drop and giving up", h.rec.errors())
	}
	if err := h.m.Close(); err != nil {
		t.Error(err)
	}
}

// TestReconnectRefusedForGood: a redial the server refuses with a client error (a revoked key)
// is not tried again.
func TestReconnectRefusedForGood(t *testing.T) {
	h := start(t, setup{})
	h.srv.Refuse(http.StatusUnauthorized)
	h.sess.Drop()
	gaveUp := h.rec.wait(t, "giving up", func(e ev) bool {
		return e.kind == "error" && strings.Contains(e.err.Error(), "could not be re-established")
	})
	if !strings.Contains(gaveUp.err.Error(), "401") || !strings.Contains(gaveUp.err.Error(), "(1 dial ") {
		t.Errorf("gave up: %v", gaveUp.err)
	}
}

// TestReconnectAgainSoonBacksOff: a connection that drops again soon after it was
// re-established is redialled after a pause, not at once.
func TestReconnectAgainSoonBacksOff(t *testing.T) {
	const interval = 100 * time.Millisecond
	h := start(t, setup{opts: Options{ReconnectInterval: interval}})
	h.sess.Drop()
	h.rec.waitReconnected(t, 1)
	h.session(t, 1).Drop()
	rc := h.rec.waitReconnected(t, 2)
	if rc.Downtime < interval/2 {
		t.Errorf("redialled after %v, want a pause of at least %v", rc.Downtime, interval/2)
	}
	h.sess = h.session(t, 2)
	h.barrier(t)
}

// TestCloseWhileReconnecting: Close stops the redials at once; no event follows.
func TestCloseWhileReconnecting(t *testing.T) {
	h := start(t, setup{})
	h.srv.Refuse(http.StatusServiceUnavailable)
	h.sess.Drop()
	h.rec.wait(t, "the drop", isLost)
	waiting := make(chan error, 1)
	go func() {
		_, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "never"})
		waiting <- err
	}()
	eventually(t, "the request waits", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return len(h.m.resp.queue) == 1
	})
	begin := time.Now()
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-waiting; err == nil {
		t.Error("the waiting Respond succeeded")
	}
	n := len(h.rec.all())
	h.srv.Refuse(0)
	time.Sleep(150 * time.Millisecond)
	if got := len(h.rec.all()); got != n {
		t.Errorf("%d events after Close", got-n)
	}
	// A dial that Close abandoned may still reach the server, whose handler can run after
	// Refuse(0) and open a session; the closed model must never use one.
	for _, e := range h.srv.Events() {
		if e.Session > 0 && e.Dir == sim.ClientToServer {
			t.Errorf("a closed model reconnected: it sent %s on session %d", e.Type, e.Session)
		}
	}
}
