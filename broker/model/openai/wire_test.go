package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// The events the adapter sends, checked as JSON on the wire against the Realtime protocol
// (NOTES: "OpenAI Realtime (GA) essentials", events.schema.json) rather than through the
// simulator's reading of them: the simulator fills in defaults (interrupt_response, a
// transcription model…) that would hide a misspelt or missing field, and the schema allows
// unknown fields.

// decoded is a client event as generic JSON.
func decoded(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

// at is the value at a path of object keys ("" when absent).
func at(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// jsonValue decodes a JSON literal of a test's expectations.
func jsonValue(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// keys are an object's keys, sorted.
func keys(v any) string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestSessionUpdateOnTheWire: the session is configured as SPEC 8/12 and NOTES ask — type
// realtime, G.711 µ-law ({"type":"audio/pcmu"}, no rate) both ways, server VAD that creates
// and interrupts responses, input transcription — and an auto-respond change sends
// turn_detection.create_response false with interrupt_response still true, and nothing the
// session cannot change any more (voice) or did not change (instructions, tools).
func TestSessionUpdateOnTheWire(t *testing.T) {
	h := start(t, setup{cfg: model.Config{Instructions: "You book trains.", Voice: "marin"}})
	h.m.SetAutoRespond(false)
	h.m.SetTools([]model.Tool{lookupTool})
	h.barrier(t)
	ups := clientEvents(h.srv, "session.update")
	if len(ups) != 3 {
		t.Fatalf("%d session.update events, want the configuration, the auto-respond change and the tools", len(ups))
	}
	first := decoded(t, ups[0])
	s := at(first, "session")
	if at(s, "type") != "realtime" || !reflect.DeepEqual(at(s, "output_modalities"), jsonValue(t, `["audio"]`)) {
		t.Errorf("session %v", s)
	}
	pcmu := jsonValue(t, `{"type":"audio/pcmu"}`)
	if got := at(s, "audio", "input", "format"); !reflect.DeepEqual(got, pcmu) {
		t.Errorf("input format %v, want %v", got, pcmu)
	}
	if got := at(s, "audio", "output", "format"); !reflect.DeepEqual(got, pcmu) {
		t.Errorf("output format %v, want %v", got, pcmu)
	}
	if got := at(s, "audio", "output", "voice"); got != "marin" {
		t.Errorf("voice %v", got)
	}
	if got, want := at(s, "audio", "input", "transcription"), jsonValue(t, `{"model":"`+DefaultTranscriptionModel+`"}`); !reflect.DeepEqual(got, want) {
		t.Errorf("transcription %v, want %v", got, want)
	}
	vad := jsonValue(t, `{"type":"server_vad","create_response":true,"interrupt_response":true}`)
	if got := at(s, "audio", "input", "turn_detection"); !reflect.DeepEqual(got, vad) {
		t.Errorf("turn_detection %v, want %v", got, vad)
	}
	if got, _ := at(s, "instructions").(string); !strings.HasPrefix(got, "You book trains.") {
		t.Errorf("instructions %q", got)
	}

	off := at(decoded(t, ups[1]), "session")
	if got, want := keys(off), "audio,type"; got != want {
		t.Errorf("the auto-respond update sets %s, want %s", got, want)
	}
	if got := keys(at(off, "audio")); got != "input" {
		t.Errorf("the auto-respond update sets audio.%s, want input only (the voice cannot change)", got)
	}
	vadOff := jsonValue(t, `{"type":"server_vad","create_response":false,"interrupt_response":true}`)
	if got := at(off, "audio", "input", "turn_detection"); !reflect.DeepEqual(got, vadOff) {
		t.Errorf("turn_detection %v, want %v", got, vadOff)
	}
	if got := at(off, "audio", "input", "format"); !reflect.DeepEqual(got, pcmu) {
		t.Errorf("the auto-respond update's input format %v", got)
	}

	tools := at(decoded(t, ups[2]), "session")
	want := jsonValue(t, `{"type":"realtime","tool_choice":"auto","tools":[{"type":"function","name":"lookup","description":"Look something up.",
		"parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]}`)
	if !reflect.DeepEqual(tools, want) {
		t.Errorf("the tools update %v, want %v", tools, want)
	}
}

// TestAudioPassesThroughUntouched: caller audio goes out as it came, one
// input_audio_buffer.append per 20 ms chunk with its µ-law bytes in base64, and agent audio
// reaches the broker byte for byte as the server sent it (DESIGN: µ-law both ways, no
// transcoding).
func TestAudioPassesThroughUntouched(t *testing.T) {
	h := start(t, setup{})
	quiet := g711.Tone(300, 200, 0.005) // varied bytes, below the VAD's threshold
	var chunks [][]byte
	for len(quiet) > 0 {
		chunks = append(chunks, quiet[:g711.SamplesPer20ms])
		quiet = quiet[g711.SamplesPer20ms:]
	}
	for _, c := range chunks {
		h.m.CallerAudio(c)
	}
	h.m.CallerAudio(nil) // nothing to send
	h.barrier(t)
	appends := clientEvents(h.srv, "input_audio_buffer.append")
	if len(appends) != len(chunks) {
		t.Fatalf("%d input_audio_buffer.append for %d chunks", len(appends), len(chunks))
	}
	for i, raw := range appends {
		ev := decoded(t, raw)
		if keys(ev) != "audio,type" {
			t.Errorf("append %d: fields %s", i, keys(ev))
		}
		s, _ := ev["audio"].(string)
		got, err := base64.StdEncoding.DecodeString(s)
		if err != nil || !bytes.Equal(got, chunks[i]) {
			t.Errorf("append %d carries %x (%v), want %x", i, got, err, chunks[i])
		}
	}

	id, err := h.m.Respond(model.Request{Kind: model.Inject, Text: words(8)})
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitDone(t, id)
	var sent, got []byte
	for _, e := range h.srv.Events() {
		if e.Dir != sim.ServerToClient || e.Type != "response.output_audio.delta" {
			continue
		}
		var d struct {
			ResponseID string `json:"response_id"`
			Delta      []byte `json:"delta"`
		}
		if err := json.Unmarshal(e.Raw, &d); err != nil {
			t.Fatal(err)
		}
		if d.ResponseID == id {
			sent = append(sent, d.Delta...)
		}
	}
	for _, e := range h.rec.of("audio", id) {
		got = append(got, e.chunk...)
	}
	if len(sent) == 0 || !bytes.Equal(got, sent) {
		t.Errorf("the broker got %d bytes of agent audio, the server sent %d: not the same bytes", len(got), len(sent))
	}
}

// TestResponseCreateOnTheWire: a requested response is response.create in the default
// conversation (no conversation field) with instructions that end with the wording line,
// metadata naming the request, and tool_choice none (SPEC 8: response.create with
// instructions and metadata); a typed turn is its user message followed at once by a bare
// response.create (the session's instructions and tools apply).
func TestResponseCreateOnTheWire(t *testing.T) {
	h := start(t, setup{})
	req := model.Request{Kind: model.Completion, Label: "report", Name: "make_report", State: "completed",
		Output: json.RawMessage(`"3 pages"`), Metadata: map[string]string{"call_id": "call_7"}}
	id, err := h.m.Respond(req)
	if err != nil {
		t.Fatal(err)
	}
	h.rec.waitDone(t, id)
	creates := clientEvents(h.srv, "response.create")
	if len(creates) != 1 {
		t.Fatalf("%d response.create", len(creates))
	}
	r := at(decoded(t, creates[0]), "response")
	if got := keys(r); got != "instructions,metadata,tool_choice" {
		t.Errorf("response.create sets %s", got)
	}
	if at(r, "tool_choice") != "none" {
		t.Errorf("tool_choice %v", at(r, "tool_choice"))
	}
	md, _ := at(r, "metadata").(map[string]any)
	if md[MetaRequest] == nil || md[MetaRequest] == "" {
		t.Errorf("metadata %v: no %s", md, MetaRequest)
	}
	delete(md, MetaRequest)
	if want := jsonValue(t, `{"backchannel_kind":"completion","backchannel_label":"report","backchannel_name":"make_report","call_id":"call_7"}`); !reflect.DeepEqual(any(md), want) {
		t.Errorf("metadata %v, want %v and the request id", md, want)
	}
	instr, _ := at(r, "instructions").(string)
	lines := strings.Split(instr, "\n")
	if want := WordingPrefix + strconv.Quote(model.Wording(req)); lines[len(lines)-1] != want {
		t.Errorf("the instructions end with %q, want %q", lines[len(lines)-1], want)
	}

	h.m.CallerTurn("say hi", nil)
	started := h.rec.wait(t, "the turn's response", func(e ev) bool { return e.kind == "started" && e.id != id })
	h.rec.waitDone(t, started.id)
	var after []map[string]any
	seen := false
	for _, e := range h.srv.Events() {
		if e.Dir != sim.ClientToServer {
			continue
		}
		if e.Type == "response.create" {
			if !seen {
				seen = true
				continue
			}
		}
		if seen {
			after = append(after, decoded(t, e.Raw))
		}
	}
	if len(after) < 2 || at(after[0], "type") != "conversation.item.create" || at(after[1], "type") != "response.create" {
		t.Fatalf("a typed turn sent %v", after)
	}
	if want := jsonValue(t, `{"type":"message","role":"user","content":[{"type":"input_text","text":"say hi"}]}`); !reflect.DeepEqual(withoutID(at(after[0], "item")), want) {
		t.Errorf("the turn's item %v, want %v", at(after[0], "item"), want)
	}
	if got := keys(at(after[1], "response")); got != "metadata" {
		t.Errorf("the turn's response.create sets %s, want metadata only", got)
	}
	if at(after[1], "response", "metadata", MetaKind) != KindTurn {
		t.Errorf("the turn's metadata %v", at(after[1], "response", "metadata"))
	}
}

// withoutID is an item without its id.
func withoutID(v any) any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for k, x := range m {
		if k != "id" {
			out[k] = x
		}
	}
	return out
}

// TestTypedTurnsFollowTheirAnswers: typed turns given while a response is active join the
// conversation only when their own response is requested, so that each turn is followed by
// its answer: two calls made during a reply are both made, in order (SPEC 12: a second call
// within the grace of the first). Added at once, the second turn sat ahead of the first call's
// output and was never answered.
func TestTypedTurnsFollowTheirAnswers(t *testing.T) {
	h := start(t, setup{sim: sim.Options{ChunkDelay: 5 * time.Millisecond}})
	h.m.CallerTurn("say "+words(10), nil)
	h.rec.waitKind(t, "audio", "")
	h.m.CallerTurn(`call pay {"amount":1}`, nil)
	h.m.CallerTurn(`call pay {"amount":2}`, nil)
	eventually(t, "two calls", func() bool { return len(h.rec.of("tool_call", "")) >= 2 })
	calls := h.rec.of("tool_call", "")
	if len(calls) != 2 || string(calls[0].args) != `{"amount":1}` || string(calls[1].args) != `{"amount":2}` {
		t.Errorf("tool calls %v, want pay 1 then pay 2", calls)
	}
	eventually(t, "three responses end", func() bool { return len(h.rec.of("done", "")) == 3 })
	var order []string
	for _, it := range h.sess.Conversation() {
		switch {
		case it.Type == "message" && it.Role == "user":
			order = append(order, "user:"+it.Text)
		case it.Type == "message" && it.Role == "assistant":
			order = append(order, "assistant")
		case it.Type == "function_call":
			order = append(order, "call:"+it.Arguments)
		}
	}
	want := []string{"user:say " + words(10), "assistant", `user:call pay {"amount":1}`, `call:{"amount":1}`, `user:call pay {"amount":2}`, `call:{"amount":2}`}
	if !slices.Equal(order, want) {
		t.Errorf("conversation %q, want %q", order, want)
	}
}

// TestToolCallArguments: arguments that are not JSON reach the broker as a JSON string (its
// argument check then answers the model), and none as {}.
func TestToolCallArguments(t *testing.T) {
	h := start(t, setup{})
	h.m.handle(&serverEvent{Type: evFunctionCallArgsDone, ResponseID: "resp_1", CallID: "call_a", Name: "lookup", Arguments: `{"q": "x"}`})
	h.m.handle(&serverEvent{Type: evFunctionCallArgsDone, ResponseID: "resp_1", CallID: "call_b", Name: "lookup", Arguments: `q=x`})
	h.m.handle(&serverEvent{Type: evFunctionCallArgsDone, ResponseID: "resp_1", CallID: "call_c", Name: "lookup"})
	got := h.rec.of("tool_call", "")
	want := []string{`{"q": "x"}`, `"q=x"`, `{}`}
	if len(got) != len(want) {
		t.Fatalf("tool calls %v", got)
	}
	for i, c := range got {
		if string(c.args) != want[i] || c.name != "lookup" {
			t.Errorf("call %s: %s %s, want lookup %s", c.callID, c.name, c.args, want[i])
		}
	}
}

// TestSimulatorSpeaksTheScriptedGrammar: the simulator answers typed turns as the scripted
// model does (SPEC 19: the same grammar, first match wins; `mute N` silences the next N
// responses), and reads the adapter's wording line. The simulator has its own copy of the
// grammar (package scripted exports none): this test keeps the two from drifting apart.
func TestSimulatorSpeaksTheScriptedGrammar(t *testing.T) {
	if sim.WordingPrefix != WordingPrefix {
		t.Fatalf("sim.WordingPrefix %q, openai.WordingPrefix %q", sim.WordingPrefix, WordingPrefix)
	}
	turns := []string{`call lookup {"q": 1}`, "call lookup", "call lookup {bad", "call a-b_c {\"x\": [1, 2]}", "cancel trip-42",
		"cancel a b", "say  hello   there ", "  hello  ", "mute 1", "say muted", "say audible"}

	// What the scripted model does with each turn.
	sc := newRecorder()
	sm, err := scripted.New(context.Background(), model.Config{}, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	var want []string
	for _, turn := range turns {
		n := len(sc.all())
		sm.CallerTurn(turn, nil)
		want = append(want, effect(sc.all()[n:]))
	}

	h := start(t, setup{})
	for i, turn := range turns {
		n := len(h.rec.all())
		h.m.CallerTurn(turn, nil)
		eventually(t, "the answer to "+turn, func() bool { return len(h.rec.of("done", "")) > i })
		if got := effect(h.rec.all()[n:]); got != want[i] {
			t.Errorf("%q: the simulator %s, the scripted model %s", turn, got, want[i])
		}
	}
}

// effect says what a model did in reply to one turn: a tool call, audible speech, or nothing
// audible.
func effect(evs []ev) string {
	said := ""
	for _, e := range evs {
		switch {
		case e.kind == "tool_call":
			return "called " + e.name + " " + string(e.args)
		case e.kind == "transcript" && e.final:
			said = e.text
		}
	}
	if said == "" {
		return "said nothing"
	}
	return "said " + strconv.Quote(said)
}
