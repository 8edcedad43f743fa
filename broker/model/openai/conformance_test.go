package openai

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
)

// TestConformance drives every mapping of the adapter in one session and checks that every
// event the adapter sent validates against #/$defs/RealtimeClientEvent and every event the
// simulator sent against #/$defs/RealtimeServerEvent (each also against its own type's
// schema), and that the exchange covered every event type either side uses.
func TestConformance(t *testing.T) {
	schemas := loadSchemas(t) // fails, saying how to provide it, when the schema is missing
	h := start(t, setup{sim: sim.Options{ChunkDelay: 10 * time.Millisecond}})
	m, rec := h.m, h.rec

	m.SetTools([]model.Tool{{Name: "lookup", Description: "Look up.", Parameters: json.RawMessage(`{"type":"object"}`)}, model.CancelJobTool})
	m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:"})
	m.SetContext(model.ContextItem{ID: "open_jobs", Text: "Open jobs:\n- a: lookup (a), pending"})

	// A spoken turn, answered by the server.
	h.srv.Transcribe("hello there")
	h.speak(300)
	first := rec.waitKind(t, "started", "")
	rec.waitDone(t, first.id)
	m.CallerTurn("hello there", nil)

	// A typed turn with a tool call, and its result spoken.
	m.CallerTurn(`call lookup {"q":"x"}`, nil)
	call := rec.waitKind(t, "tool_call", "")
	m.ToolResult(call.callID, `"found"`, false, true)
	rec.wait(t, "the result", func(e ev) bool { return e.kind == "transcript" && e.final && e.text == `lookup returned: "found"` })

	// A narration cut while it is generated.
	id, err := m.Respond(model.Request{Kind: model.Completion, Label: "a", Name: "lookup", State: "completed", Output: json.RawMessage(`"ok"`), Metadata: map[string]string{"call_id": "call_x"}})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitKind(t, "audio", id)
	m.Cancel(id)
	rec.waitDone(t, id)

	// Auto-respond off and on, and an error answering a client event.
	m.SetAutoRespond(false)
	m.SetAutoRespond(true)
	m.ToolResult("call_unknown", "x", false, false)
	rec.waitKind(t, "error", "")
	h.barrier(t)

	events := h.srv.Events()
	seen := map[sim.Direction]map[string]bool{sim.ClientToServer: {}, sim.ServerToClient: {}}
	for i, e := range events {
		seen[e.Dir][e.Type] = true
		if err := schemas.validate(e.Dir, e.Raw); err != nil {
			t.Errorf("event %d (%s %s): %v\n%s", i, e.Dir, e.Type, err, clipForLog(e.Raw))
		}
	}
	client := []string{"session.update", "input_audio_buffer.append", "conversation.item.create", "conversation.item.delete",
		"conversation.item.truncate", "response.create", "response.cancel"}
	server := []string{"session.created", "session.updated", "error",
		"input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
		"conversation.item.added", "conversation.item.done", "conversation.item.deleted", "conversation.item.truncated",
		"conversation.item.input_audio_transcription.delta", "conversation.item.input_audio_transcription.completed",
		"response.created", "response.output_item.added", "response.content_part.added",
		"response.output_audio.delta", "response.output_audio_transcript.delta",
		"response.output_audio.done", "response.output_audio_transcript.done", "response.content_part.done",
		"response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done", "response.done"}
	for _, typ := range client {
		if !seen[sim.ClientToServer][typ] {
			t.Errorf("the exchange never sent %s", typ)
		}
	}
	for _, typ := range server {
		if !seen[sim.ServerToClient][typ] {
			t.Errorf("the simulator never sent %s", typ)
		}
	}
	var types []string
	for typ := range seen[sim.ClientToServer] {
		types = append(types, typ)
	}
	sort.Strings(types)
	t.Logf("validated %d events against %s; client event types: %s", len(events), schemas.path, strings.Join(types, ", "))
}

// trailingComma is a comma before a closing brace or bracket.
var trailingComma = regexp.MustCompile(`,(\s*[}\]])`)

// TestServerEventExamples feeds the published example of every server event into the
// adapter's decoder, and those the adapter maps through its handler, checking what it reports.
func TestServerEventExamples(t *testing.T) {
	schemas := loadSchemas(t)
	h := start(t, setup{})
	examples := map[string][]byte{}
	for name, def := range schemas.defs() {
		if !strings.HasPrefix(name, "RealtimeServerEvent") || name == "RealtimeServerEvent" {
			continue
		}
		d, _ := def.(map[string]any)
		meta, _ := d["x-oaiMeta"].(map[string]any)
		ex, _ := meta["example"].(string)
		typ := eventTypeOf(def)
		if ex == "" || typ == "" {
			continue
		}
		// A few published examples carry a trailing comma (JavaScript style): drop it.
		ex = trailingComma.ReplaceAllString(ex, "$1")
		var e serverEvent
		if err := json.Unmarshal([]byte(ex), &e); err != nil {
			t.Errorf("%s: the example does not decode: %v", typ, err)
			continue
		}
		if strings.TrimSpace(e.Type) != typ { // one published example has a stray space

			t.Errorf("%s: decoded type %q", typ, e.Type)
		}
		examples[typ] = []byte(ex)
	}
	feed := func(typ string) serverEvent {
		t.Helper()
		raw, ok := examples[typ]
		if !ok {
			t.Fatalf("the schema has no example of %s", typ)
		}
		var e serverEvent
		_ = json.Unmarshal(raw, &e)
		h.m.handle(&e)
		return e
	}
	before := len(h.rec.all())
	feed("input_audio_buffer.speech_started")
	feed("input_audio_buffer.speech_stopped")
	feed("input_audio_buffer.committed")
	tr := feed("conversation.item.input_audio_transcription.completed")
	created := feed("response.created")
	feed("response.output_audio_transcript.done")
	call := feed("response.function_call_arguments.done")
	done := feed("response.done")
	feed("error")
	got := h.rec.all()[before:]
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, e.kind)
	}
	want := "speech_started,speech_stopped,caller_transcript,started,transcript,tool_call,done,error"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("reported %v, want %s", got, want)
	}
	if got[2].text != tr.Transcript || !got[2].final || tr.Transcript == "" {
		t.Errorf("caller transcript %v", got[2])
	}
	if got[3].id != created.Response.ID {
		t.Errorf("started %v", got[3])
	}
	if got[5].name != call.Name || string(got[5].args) != call.Arguments || got[5].callID != call.CallID {
		t.Errorf("tool call %v, example %+v", got[5], call)
	}
	if got[6].id != done.Response.ID || got[6].cancelled || got[6].err != nil {
		t.Errorf("done %v", got[6])
	}
	if !strings.Contains(got[7].err.Error(), "invalid_event") {
		t.Errorf("error %v", got[7].err)
	}
}
