package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
)

func TestDialConfiguresTheSession(t *testing.T) {
	h := start(t, setup{
		opts: Options{Model: "gpt-realtime-mini", Voice: "alloy", Instructions: "server default persona"},
		cfg:  model.Config{Kind: "openai", Instructions: "You book trains.", Voice: "marin"},
	})
	if got := h.sess.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := h.sess.Header.Get("OpenAI-Beta"); got != "" {
		t.Errorf("the GA protocol takes no beta header; got OpenAI-Beta: %q", got)
	}
	if h.sess.Model != "gpt-realtime-mini" {
		t.Errorf("model query parameter = %q", h.sess.Model)
	}
	c := h.sess.Config()
	if c.InputFormat != sim.FormatPCMU || c.OutputFormat != sim.FormatPCMU {
		t.Errorf("audio formats in/out = %s/%s, want audio/pcmu both ways", c.InputFormat, c.OutputFormat)
	}
	if c.TurnDetection != "server_vad" || !c.CreateResponse || !c.InterruptResponse {
		t.Errorf("turn detection = %s create_response=%v interrupt_response=%v", c.TurnDetection, c.CreateResponse, c.InterruptResponse)
	}
	if c.TranscriptionModel != DefaultTranscriptionModel {
		t.Errorf("transcription model = %q", c.TranscriptionModel)
	}
	if c.Voice != "marin" {
		t.Errorf("voice = %q, want the session's marin", c.Voice)
	}
	if !strings.HasPrefix(c.Instructions, "You book trains.") || !strings.Contains(c.Instructions, AgentRules) ||
		strings.Contains(c.Instructions, "server default persona") {
		t.Errorf("instructions = %q", c.Instructions)
	}
}

func TestDefaults(t *testing.T) {
	h := start(t, setup{})
	if h.sess.Model != DefaultModel {
		t.Errorf("model = %q, want %q", h.sess.Model, DefaultModel)
	}
	c := h.sess.Config()
	if !strings.HasPrefix(c.Instructions, DefaultPersona) {
		t.Errorf("instructions = %q", c.Instructions)
	}
	if c.Voice != "alloy" { // the server's default: the adapter names none
		t.Errorf("voice = %q", c.Voice)
	}
	o := Options{}.withDefaults()
	if o.URL != "wss://api.openai.com/v1/realtime" || o.Model != "gpt-realtime" {
		t.Errorf("defaults: %s %s", o.URL, o.Model)
	}
}

func TestDialFailures(t *testing.T) {
	srv := sim.New(sim.Options{APIKey: testKey})
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	_, err := Dial(context.Background(), Options{URL: srv.URL(), APIKey: "wrong", HTTPClient: client}, model.Config{}, newRecorder())
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a wrong key: err = %v, want HTTP 401 without the key", err)
	}
	_, err = Dial(context.Background(), Options{URL: "ws://127.0.0.1:1/v1/realtime", HTTPClient: client, DialTimeout: time.Second}, model.Config{}, newRecorder())
	if err == nil {
		t.Error("dialing a closed port succeeded")
	}
	f := New(Options{URL: "://bad"})
	if _, err := f(context.Background(), model.Config{}, newRecorder()); err == nil {
		t.Error("a bad URL was accepted")
	}
}

func TestCallerSpeechIsHeardOnce(t *testing.T) {
	h := start(t, setup{})
	h.srv.Transcribe("what is the weather")
	h.speak(400)
	h.rec.waitKind(t, "speech_started", "")
	h.rec.waitKind(t, "speech_stopped", "")
	tr := h.rec.wait(t, "the caller's final transcript", func(e ev) bool { return e.kind == "caller_transcript" && e.final })
	if tr.text != "what is the weather" {
		t.Errorf("caller transcript = %q", tr.text)
	}
	// The server answers the turn it heard on its own.
	started := h.rec.waitKind(t, "started", "")
	if got := h.rec.finalTranscript(t, started.id); got != "I heard: what is the weather" {
		t.Errorf("the model said %q", got)
	}
	h.rec.waitDone(t, started.id)
	if h.audioOf(started.id) == 0 {
		t.Error("no audio")
	}
	// The broker passes the turn back: it is not added or answered a second time.
	h.m.CallerTurn("what is the weather", nil)
	h.barrier(t)
	if n := len(clientEvents(h.srv, "response.create")); n != 0 {
		t.Errorf("%d response.create for a turn the server answered", n)
	}
	if got := h.userItems(); len(got) != 1 {
		t.Errorf("user items = %q, want the one audio turn", got)
	}
	// Speech order: started, stopped, transcript.
	var order []string
	for _, e := range h.rec.all() {
		switch e.kind {
		case "speech_started", "speech_stopped":
			order = append(order, e.kind)
		case "caller_transcript":
			if e.final {
				order = append(order, e.kind)
			}
		}
	}
	if strings.Join(order, ",") != "speech_started,speech_stopped,caller_transcript" {
		t.Errorf("caller events = %v", order)
	}
}

func (h *harness) audioOf(id string) int { return h.rec.audioBytes(id) }

func TestAutoRespondOff(t *testing.T) {
	h := start(t, setup{})
	h.m.SetAutoRespond(false)
	eventually(t, "create_response is off", func() bool { return !h.sess.Config().CreateResponse })
	updates := h.sess.Config().Updates
	h.m.SetAutoRespond(false) // no change, no update
	h.srv.Transcribe("yes please")
	h.speak(300)
	h.rec.wait(t, "the transcript", func(e ev) bool { return e.kind == "caller_transcript" && e.final && e.text == "yes please" })
	if n := len(h.sess.Responses()); n != 0 {
		t.Fatalf("%d responses while auto-respond is off", n)
	}
	// The broker did not consume the turn: the model answers the audio it heard, with no
	// second user item.
	h.m.CallerTurn("yes please", nil)
	started := h.rec.waitKind(t, "started", "")
	if got := h.rec.finalTranscript(t, started.id); got != "I heard: yes please" {
		t.Errorf("the model said %q", got)
	}
	if r := h.response(t, started.id); r.Metadata[MetaKind] != KindTurn || r.ServerInitiated {
		t.Errorf("response record %+v", r)
	}
	if got := h.userItems(); len(got) != 1 {
		t.Errorf("user items = %q", got)
	}
	h.m.SetAutoRespond(true)
	eventually(t, "create_response is on", func() bool { return h.sess.Config().CreateResponse })
	if got := h.sess.Config().Updates; got != updates+1 {
		t.Errorf("session updates = %d, want %d (one for each change)", got, updates+1)
	}
	c := h.sess.Config()
	if c.InputFormat != sim.FormatPCMU || c.TranscriptionModel == "" || c.Voice != "alloy" {
		t.Errorf("a later update lost settings: %+v", c)
	}
}

func TestCallerTurnText(t *testing.T) {
	h := start(t, setup{})
	h.m.CallerTurn("say good morning everyone", nil)
	started := h.rec.waitKind(t, "started", "")
	if got := h.rec.finalTranscript(t, started.id); got != "good morning everyone" {
		t.Errorf("the model said %q", got)
	}
	h.rec.waitDone(t, started.id)
	if got, want := h.audioOf(started.id), sim.MinSpeechMS*8; got != want {
		t.Errorf("audio = %d bytes, want %d (300 ms of µ-law, passed through)", got, want)
	}
	if got := h.userItems(); len(got) != 1 || got[0] != "say good morning everyone" {
		t.Errorf("user items = %q", got)
	}
	if r := h.response(t, started.id); r.Metadata[MetaKind] != KindTurn {
		t.Errorf("metadata = %v", r.Metadata)
	}
	// Partial transcripts grow to the final one.
	var last string
	for _, e := range h.rec.of("transcript", started.id) {
		if !e.final {
			if !strings.HasPrefix(e.text, last) {
				t.Errorf("partial %q does not extend %q", e.text, last)
			}
			last = e.text
		}
	}
	if last != "good morning everyone" {
		t.Errorf("last partial = %q", last)
	}
}

func TestCallerTurnClarify(t *testing.T) {
	h := start(t, setup{})
	h.m.CallerTurn("purple", []string{"red", "blue"})
	started := h.rec.waitKind(t, "started", "")
	if got := h.rec.finalTranscript(t, started.id); got != "Please choose one of: red, blue." {
		t.Errorf("the model said %q", got)
	}
	r := h.response(t, started.id)
	if r.Metadata[MetaKind] != KindClarify || !strings.Contains(r.Instructions, "red; blue") {
		t.Errorf("response %+v", r)
	}
	// A clarified turn that asks for something else is still served.
	h.rec.waitDone(t, started.id)
	h.m.CallerTurn("call lookup {}", []string{"red", "blue"})
	call := h.rec.waitKind(t, "tool_call", "")
	if call.name != "lookup" {
		t.Errorf("tool call %v", call)
	}
}

func TestRespondVoicesEachRequest(t *testing.T) {
	h := start(t, setup{})
	reqs := []model.Request{
		{Kind: model.HandOff, Label: "Booking trains", Name: "book"},
		{Kind: model.Milestone, Label: "Booking trains", Name: "book", Segment: json.RawMessage(`"found 3 trains"`)},
		{Kind: model.InteractionAsk, Prompt: "Which seat?", Options: []string{"window", "aisle"}},
		{Kind: model.Completion, Label: "report", Name: "report", State: "completed", Output: json.RawMessage(`{"pages":3}`)},
		{Kind: model.Completion, Label: "report", Name: "report", State: "failed", Error: "disk full"},
		{Kind: model.Completion, Label: "report", Name: "report", State: "timed_out"},
		{Kind: model.Inject, Text: "Your driver is outside."},
		{Kind: model.PermissionAsk, Name: "pay", Args: json.RawMessage(`{ "amount": 40 }`)},
		{Kind: model.Clarification, Name: "pay", Args: json.RawMessage(`{"amount":40}`)},
		{Kind: model.Decline, Name: "pay", Args: json.RawMessage(`{"amount":40}`)},
	}
	// Phrases the instructions must carry besides the sentence.
	phrases := map[model.Kind][]string{
		model.HandOff:        {`"Booking trains"`, "background"},
		model.Milestone:      {"found 3 trains"},
		model.InteractionAsk: {"Which seat?", "window; aisle", "never answer it yourself"},
		model.Completion:     {`"report"`},
		model.Inject:         {"Your driver is outside."},
		model.PermissionAsk:  {`"pay"`, `{"amount":40}`, "do not answer for the caller"},
		model.Clarification:  {"clear yes or no", "Do not answer for the caller"},
		model.Decline:        {"will not run"},
	}
	for _, req := range reqs {
		id, err := h.m.Respond(req)
		if err != nil {
			t.Fatalf("%s: %v", req.Kind, err)
		}
		if got, want := h.rec.finalTranscript(t, id), model.Wording(req); got != want {
			t.Errorf("%s: the model said %q, want %q", req.Kind, got, want)
		}
		done := h.rec.waitDone(t, id)
		if done.cancelled || done.err != nil {
			t.Errorf("%s: done %v", req.Kind, done)
		}
		if len(h.rec.of("started", id)) != 1 {
			t.Errorf("%s: ResponseStarted reported %d times", req.Kind, len(h.rec.of("started", id)))
		}
		r := h.response(t, id)
		if r.Metadata[MetaKind] != string(req.Kind) || r.Metadata[MetaRequest] == "" || r.ServerInitiated {
			t.Errorf("%s: metadata %v", req.Kind, r.Metadata)
		}
		if r.ToolChoice != "none" {
			t.Errorf("%s: tool_choice %q, want none for a narration", req.Kind, r.ToolChoice)
		}
		if !strings.HasPrefix(r.Instructions, h.sess.Config().Instructions+"\n\n") {
			t.Errorf("%s: the instructions do not start with the session's", req.Kind)
		}
		for _, p := range phrases[req.Kind] {
			if !strings.Contains(r.Instructions, p) {
				t.Errorf("%s: instructions lack %q:\n%s", req.Kind, p, r.Instructions)
			}
		}
	}
	if n := len(h.rec.errors()); n != 0 {
		t.Errorf("errors: %v", h.rec.errors())
	}
}

func TestRespondMetadataIsBounded(t *testing.T) {
	h := start(t, setup{})
	md := map[string]string{"call_id": "call_1", strings.Repeat("k", 80): "too long a key", "big": strings.Repeat("é", 400)}
	for i := range 20 {
		md[string(rune('a'+i))] = "x"
	}
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Label: "trip", Text: "Hello there.", Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitDone(t, id)
	r := h.response(t, id)
	if len(r.Metadata) != 16 || r.Metadata[MetaKind] != "inject" || r.Metadata[MetaLabel] != "trip" || r.Metadata["a"] != "x" {
		t.Errorf("metadata %v", r.Metadata)
	}
	for k, v := range r.Metadata {
		if len(k) > 64 || len(v) > 512 {
			t.Errorf("metadata %q is over the limits", k)
		}
	}
}

func TestOneResponseAtATime(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 5 * time.Millisecond}})
	h.m.CallerTurn("say "+words(12), nil)
	h.rec.waitKind(t, "started", "")
	var wg sync.WaitGroup
	ids := make([]string, 4)
	errs := make([]error, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = h.m.Respond(model.Request{Kind: model.Inject, Text: words(3 + i)})
		}()
	}
	// Tool results and turns queue too.
	h.m.CallerTurn("say "+words(2), nil)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Respond %d: %v", i, err)
		}
	}
	for _, id := range ids {
		h.rec.waitDone(t, id)
	}
	eventually(t, "six responses", func() bool { return len(h.rec.of("done", "")) == 6 })
	// Responses never overlap on the wire.
	active := ""
	for _, e := range h.srv.Events() {
		if e.Dir != sim.ServerToClient || (e.Type != "response.created" && e.Type != "response.done") {
			continue
		}
		var x struct {
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		_ = json.Unmarshal(e.Raw, &x)
		if e.Type == "response.created" {
			if active != "" {
				t.Fatalf("response %s created while %s is active", x.Response.ID, active)
			}
			active = x.Response.ID
		} else {
			active = ""
		}
	}
}

func TestClashWithTheServersResponseIsRetried(t *testing.T) {
	h := start(t, setup{clashing: true})
	h.sess.ClashNextResponse()
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "The table is booked."})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.rec.finalTranscript(t, id); got != "The table is booked." {
		t.Errorf("said %q", got)
	}
	if n := countErrors(h.srv, codeActiveResponse); n != 1 {
		t.Errorf("%d clashes, want the one provoked", n)
	}
	rs := h.sess.Responses()
	if len(rs) != 2 || !rs[0].ServerInitiated || rs[1].ID != id {
		t.Errorf("responses %+v", rs)
	}
	// The server's own response reached the broker too, before ours.
	h.rec.waitDone(t, rs[0].ID)
	if len(h.rec.errors()) != 0 {
		t.Errorf("a handled clash was reported: %v", h.rec.errors())
	}
	if len(clientEvents(h.srv, "response.create")) != 2 {
		t.Errorf("response.create sent %d times, want 2", len(clientEvents(h.srv, "response.create")))
	}
}

func TestCancelWhileGenerating(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 20 * time.Millisecond}})
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(30)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitKind(t, "audio", id)
	time.Sleep(30 * time.Millisecond)
	h.m.Cancel(id)
	done := h.rec.waitDone(t, id)
	if !done.cancelled || done.err != nil {
		t.Errorf("done %v, want cancelled", done)
	}
	r := h.response(t, id)
	if r.Status != "cancelled" || r.Reason != "client_cancelled" {
		t.Errorf("response %+v", r)
	}
	h.barrier(t)
	cancels := clientEvents(h.srv, "response.cancel")
	if len(cancels) != 1 || !strings.Contains(string(cancels[0]), id) {
		t.Errorf("response.cancel events %s", cancels)
	}
	// Over WebSocket, barge-in is response.cancel of that response plus
	// conversation.item.truncate of its audio item (NOTES).
	if c := decoded(t, cancels[0]); keys(c) != "event_id,response_id,type" || c["response_id"] != id {
		t.Errorf("response.cancel %s, want the response_id %s", cancels[0], id)
	}
	truncs := clientEvents(h.srv, "conversation.item.truncate")
	if len(truncs) != 1 {
		t.Fatalf("conversation.item.truncate events %s", truncs)
	}
	var tr struct {
		ItemID       string `json:"item_id"`
		ContentIndex *int   `json:"content_index"`
		AudioEndMS   int64  `json:"audio_end_ms"`
	}
	_ = json.Unmarshal(truncs[0], &tr)
	if tr.AudioEndMS <= 0 || tr.AudioEndMS > int64(h.audioOf(id)/8) {
		t.Errorf("truncated at %d ms of %d ms received", tr.AudioEndMS, h.audioOf(id)/8)
	}
	var spoken []string
	for _, it := range h.sess.Conversation() {
		if it.Type == "message" && it.Role == "assistant" {
			spoken = append(spoken, it.ID)
		}
	}
	if len(spoken) != 1 || tr.ItemID != spoken[0] || tr.ContentIndex == nil || *tr.ContentIndex != 0 {
		t.Errorf("truncated item %s content %v, want the response's audio item %v, content 0", tr.ItemID, tr.ContentIndex, spoken)
	}
	if len(h.rec.errors()) != 0 {
		t.Errorf("errors: %v", h.rec.errors())
	}
}

func TestCancelAfterTheServerFinished(t *testing.T) {
	h := start(t, setup{})
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(20)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitDone(t, id)
	time.Sleep(100 * time.Millisecond) // the broker is still playing the audio
	h.m.Cancel(id)
	h.m.Cancel(id)
	h.barrier(t)
	if n := len(clientEvents(h.srv, "response.cancel")); n != 0 {
		t.Errorf("%d response.cancel for a finished response", n)
	}
	truncs := clientEvents(h.srv, "conversation.item.truncate")
	if len(truncs) != 1 {
		t.Fatalf("truncate events %s", truncs)
	}
	var item sim.Item
	for _, it := range h.sess.Conversation() {
		if it.Role == "assistant" {
			item = it
		}
	}
	if item.AudioMS < 100 || item.AudioMS >= 20*60 || item.Text != "" {
		t.Errorf("the spoken item after truncation: %d ms, %q; want the ~100 ms heard so far", item.AudioMS, item.Text)
	}
	if len(h.rec.errors()) != 0 {
		t.Errorf("errors: %v", h.rec.errors())
	}
	h.m.Cancel("resp_unknown")
}

func TestBargeInByServerVAD(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 20 * time.Millisecond}})
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(30)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitKind(t, "audio", id)
	h.speak(200)
	h.rec.waitKind(t, "speech_started", "")
	done := h.rec.waitDone(t, id)
	if !done.cancelled {
		t.Errorf("done %v", done)
	}
	if r := h.response(t, id); r.Reason != "turn_detected" {
		t.Errorf("cancel reason %q", r.Reason)
	}
	// The broker's own barge-in follows: the response is over, so only the item is truncated.
	h.m.Cancel(id)
	h.barrier(t)
	if n := len(clientEvents(h.srv, "response.cancel")); n != 0 {
		t.Errorf("%d response.cancel for a response the server cancelled", n)
	}
	if n := len(clientEvents(h.srv, "conversation.item.truncate")); n != 1 {
		t.Errorf("%d truncates", n)
	}
	if len(h.rec.errors()) != 0 {
		t.Errorf("errors: %v", h.rec.errors())
	}
}

func TestToolCallsAndResults(t *testing.T) {
	h := start(t, setup{})
	h.m.SetTools([]model.Tool{
		{Name: "lookup", Description: "Look something up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		{Name: "noparams", Description: "No parameters."},
		model.CancelJobTool,
	})
	eventually(t, "the tools are declared", func() bool {
		return strings.Join(h.sess.Config().ToolNames(), ",") == "lookup,noparams,cancel_job"
	})
	c := h.sess.Config()
	if string(c.ToolChoice) != `"auto"` || string(c.Tools[1].Parameters) != defaultToolParametersJSON {
		t.Errorf("tools %+v choice %s", c.Tools, c.ToolChoice)
	}

	// An instant result the model speaks about.
	h.m.CallerTurn(`call lookup {"q": "weather"}`, nil)
	call := h.rec.waitKind(t, "tool_call", "")
	if call.name != "lookup" || string(call.args) != `{"q":"weather"}` || call.callID == "" {
		t.Fatalf("tool call %v", call)
	}
	h.m.ToolResult(call.callID, `{"temp":21}`, false, true) // at once, while the call's response may be active
	r := h.rec.wait(t, "the result response", func(e ev) bool { return e.kind == "transcript" && e.final })
	if r.text != `lookup returned: {"temp":21}` {
		t.Errorf("said %q", r.text)
	}
	if rr := h.response(t, r.id); rr.Metadata[MetaKind] != KindToolResult {
		t.Errorf("metadata %v", rr.Metadata)
	}
	h.rec.waitDone(t, r.id)

	// An error result.
	h.m.CallerTurn("call lookup", nil)
	call2 := h.rec.wait(t, "a second call", func(e ev) bool { return e.kind == "tool_call" && e.callID != call.callID })
	if string(call2.args) != `{}` {
		t.Errorf("args %s", call2.args)
	}
	h.m.ToolResult(call2.callID, "Tool lookup is not available", true, true)
	r2 := h.rec.wait(t, "the error response", func(e ev) bool { return e.kind == "transcript" && e.final && e.id != r.id })
	if r2.text != "lookup failed: Tool lookup is not available" {
		t.Errorf("said %q", r2.text)
	}
	h.rec.waitDone(t, r2.id)

	// cancel_job, answered silently.
	h.m.CallerTurn("cancel trip-42", nil)
	call3 := h.rec.wait(t, "cancel_job", func(e ev) bool { return e.kind == "tool_call" && e.name == "cancel_job" })
	if string(call3.args) != `{"ref":"trip-42"}` {
		t.Errorf("args %s", call3.args)
	}
	before := len(h.sess.Responses())
	h.m.ToolResult(call3.callID, "cancelled", false, false)
	h.barrier(t)
	if got := len(h.sess.Responses()); got != before {
		t.Errorf("a silent tool result started a response (%d → %d)", before, got)
	}
	var outputs []string
	for _, it := range h.sess.Conversation() {
		if it.Type == "function_call_output" {
			outputs = append(outputs, it.Output)
		}
	}
	want := []string{`{"temp":21}`, `{"error":"Tool lookup is not available"}`, "cancelled"}
	if strings.Join(outputs, "|") != strings.Join(want, "|") {
		t.Errorf("function outputs %q, want %q", outputs, want)
	}
}

func TestSetContextReplacesByID(t *testing.T) {
	h := start(t, setup{})
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:\n- trip: book (trip), deferred"})
	h.m.SetContext(model.ContextItem{ID: "progress:call_1", Text: "Progress of trip (trip): 50%"})
	h.m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:"})
	eventually(t, "the context items settle", func() bool {
		var got []string
		for _, it := range h.sess.Conversation() {
			if it.Role == "system" {
				got = append(got, it.Text)
			}
		}
		return strings.Join(got, "|") == "Progress of trip (trip): 50%|Open jobs:"
	})
	if n := len(h.sess.Responses()); n != 0 {
		t.Errorf("context started %d responses", n)
	}
	if len(h.rec.errors()) != 0 {
		t.Errorf("errors: %v", h.rec.errors())
	}
}

func TestMuteAndFailedResponses(t *testing.T) {
	h := start(t, setup{})
	h.m.CallerTurn("mute 1", nil)
	first := h.rec.waitKind(t, "started", "")
	h.rec.waitDone(t, first.id)
	id, err := h.m.Respond(model.Request{Kind: model.HandOff, Label: "trip", Name: "book"})
	if err != nil {
		t.Fatal(err)
	}
	done := h.rec.waitDone(t, id)
	if done.err != nil || done.cancelled || h.audioOf(id) != 0 || len(h.rec.of("transcript", id)) != 0 {
		t.Errorf("a muted response: %v, %d bytes, transcripts %v", done, h.audioOf(id), h.rec.of("transcript", id))
	}
	h.sess.FailNextResponse("server_overloaded")
	id, err = h.m.Respond(model.Request{Kind: model.HandOff, Label: "trip", Name: "book"})
	if err != nil {
		t.Fatal(err)
	}
	done = h.rec.waitDone(t, id)
	if done.err == nil || !strings.Contains(done.err.Error(), "server_overloaded") || done.cancelled {
		t.Errorf("a failed response: %v", done)
	}
}

func TestServerErrorsAreReported(t *testing.T) {
	h := start(t, setup{})
	h.sess.SendError("server_error", "The server had an error.")
	e := h.rec.waitKind(t, "error", "")
	if !strings.Contains(e.err.Error(), "The server had an error.") {
		t.Errorf("error %v", e.err)
	}
	// An error answering a client event (an output for a call that does not exist).
	h.m.ToolResult("call_missing", "x", false, false)
	h.rec.wait(t, "the second error", func(e ev) bool { return e.kind == "error" && strings.Contains(e.err.Error(), "call_missing") })
}

// TestConnectionLossWithoutReconnect: with reconnecting off, a dropped connection is reported
// once and later commands do nothing.
func TestConnectionLossWithoutReconnect(t *testing.T) {
	h := start(t, setup{opts: Options{ReconnectTimeout: -1}})
	h.sess.Drop()
	e := h.rec.waitKind(t, "error", "")
	if !strings.Contains(e.err.Error(), "lost") || !errors.Is(e.err, ErrConnectionLost) || strings.Contains(e.err.Error(), "reconnecting") {
		t.Errorf("error %v", e.err)
	}
	begin := time.Now()
	if _, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "hi"}); err == nil || time.Since(begin) > time.Second {
		t.Errorf("Respond on a lost connection: %v after %v", err, time.Since(begin))
	}
	h.m.CallerAudio([]byte{1, 2, 3})
	h.m.CallerTurn("hello", nil)
	h.m.SetContext(model.ContextItem{ID: "x", Text: "y"})
	h.m.ToolResult("c", "o", false, true)
	h.m.SetTools(nil)
	h.m.SetAutoRespond(false)
	h.m.Cancel("r")
	if err := h.m.Close(); err != nil {
		t.Error(err)
	}
	if n := len(h.rec.errors()); n != 1 {
		t.Errorf("%d errors, want the loss once", n)
	}
	if n := len(h.srv.Sessions()); n != 1 {
		t.Errorf("%d sessions: the adapter redialled", n)
	}
}

func TestRespondTimeoutAbandonsTheRequest(t *testing.T) {
	h := start(t, setup{opts: Options{RespondTimeout: 150 * time.Millisecond}})
	h.sess.Stall()
	_, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "late words"})
	if !errors.Is(err, ErrRespondTimeout) {
		t.Fatalf("err = %v", err)
	}
	// The request either reached the server before Respond gave up (a loaded machine may not
	// have sent it that fast: it is then withdrawn, and never sent).
	sent := h.srv.Count(sim.ClientToServer, "response.create") > 0
	h.sess.Resume()
	if sent {
		// The late response is cancelled and never reported.
		eventually(t, "the late response is cancelled", func() bool {
			rs := h.sess.Responses()
			return len(rs) == 1 && rs[0].Status == "cancelled"
		})
	} else {
		t.Log("the request was withdrawn before it was sent")
	}
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "on time"})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.rec.finalTranscript(t, id); got != "on time" {
		t.Errorf("said %q", got)
	}
	for _, e := range h.rec.all() {
		if e.id != "" && e.id != id {
			t.Errorf("an event of the abandoned response: %v", e)
		}
	}
	if len(h.rec.errors()) != 0 {
		t.Errorf("errors: %v", h.rec.errors())
	}
}

func TestCloseStopsEvents(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 10 * time.Millisecond}})
	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(40)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitKind(t, "audio", id)
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(h.rec.all())
	time.Sleep(60 * time.Millisecond)
	if got := len(h.rec.all()); got != n {
		t.Errorf("%d events after Close", got-n)
	}
	if err := h.m.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := h.m.Respond(model.Request{Kind: model.Inject, Text: "x"}); err == nil {
		t.Error("Respond after Close succeeded")
	}
	h.m.CallerTurn("x", nil)
}

func TestContextEndClosesTheModel(t *testing.T) {
	srv := sim.New(sim.Options{})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	f := New(Options{URL: srv.URL()})
	m, err := f(ctx, model.Config{}, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	eventually(t, "the model is closed", func() bool {
		_, err := m.Respond(model.Request{Kind: model.Inject, Text: "x"})
		return err != nil
	})
	_ = m.Close()
}
