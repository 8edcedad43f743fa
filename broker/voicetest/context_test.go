package voicetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestModelContext checks what the voice model is told as silent context (SPEC 8, 9), exactly:
// the one system item of open jobs, `Open jobs:` then a line `- REF: NAME (LABEL), STATE` per
// job (REF the broker call id before a defer, the handle after; LABEL the status_label, or the
// tool name), replaced on every change; progress notes; the answer of an interaction as
// `Caller answered INTERACTION_ID: TEXT`; and an interaction the host closed as moot.
func TestModelContext(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			rec := &contextRecorder{}
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{
				ResumeWindow: 20 * time.Second,
				Models:       map[string]model.Factory{"scripted": rec.factory(scriptedModel)},
			}})
			vs := newVoiceSession(t, b, true)

			tc := vs.callTool("slow", `{"job":"report"}`)
			callID := tc.F.str("call_id")
			rec.wait(t, "open_jobs", fmt.Sprintf("Open jobs:\n- %s: slow (slow), pending", callID))
			from := vs.caller.mark()
			j := vs.deferCall(callID, "the report")
			rec.wait(t, "open_jobs", fmt.Sprintf("Open jobs:\n- %s: slow (the report), deferred", j.handle))
			vs.hear(from, "Started the report in the background.")

			vs.host.send(map[string]any{"type": "tool_progress", "handle": j.handle, "note": "page 3 of 10"})
			rec.wait(t, "progress:"+callID, fmt.Sprintf("Progress of %s (the report): page 3 of 10", j.handle))

			ia := vs.askDelivered(j, "PDF or slides?", []string{"PDF", "slides"})
			vs.say("Slides, please")
			vs.host.expect(typ("tool_interaction_answer", "call_id", j.callID))
			rec.wait(t, "interaction:"+ia, "Caller answered "+ia+": Slides, please")

			moot := unique("ia-moot")
			vs.talk() // the ask stays queued
			vs.partial(j, "one more", false, map[string]any{"id": moot, "prompt": "Colour or grey?", "options": []string{"colour", "grey"}})
			vs.host.expect(typ("tool_job_narration", "interaction_id", moot, "state", "queued"))
			vs.host.send(map[string]any{"type": "tool_interaction_update", "id": "u1", "handle": j.handle, "interaction_id": moot, "state": "cancelled"})
			vs.host.expect(typ("tool_interaction_update_ack", "ref", "u1"))
			got := rec.waitFor(t, "interaction:"+moot, func(text string) bool { return text != "" })
			if !strings.Contains(got, moot) || !strings.Contains(got, "moot") {
				t.Errorf("SPEC 9: the model was told %q about the closed interaction, want it named moot", got)
			}
			vs.mic.silence()

			vs.result(j, "done")
			rec.wait(t, "open_jobs", "Open jobs:")
		})
	}
}

// contextRecorder wraps a model factory to record the silent context items the broker gives the
// model (the latest text per item id), passing everything on to the real model.
type contextRecorder struct {
	mu    sync.Mutex
	items map[string]string
}

// contextModel is a model whose SetContext calls are recorded.
type contextModel struct {
	model.Model
	rec *contextRecorder
}

func (m *contextModel) SetContext(item model.ContextItem) {
	m.rec.mu.Lock()
	if m.rec.items == nil {
		m.rec.items = map[string]string{}
	}
	m.rec.items[item.ID] = item.Text
	m.rec.mu.Unlock()
	m.Model.SetContext(item)
}

func (r *contextRecorder) factory(inner model.Factory) model.Factory {
	return wrapModels(inner, func(m model.Model) model.Model { return &contextModel{Model: m, rec: r} })
}

// wait waits up to waitTimeout for the context item id to read exactly want.
func (r *contextRecorder) wait(t testing.TB, id, want string) {
	t.Helper()
	r.waitFor(t, id, func(text string) bool { return text == want })
}

// waitFor waits up to waitTimeout for the context item id to satisfy ok and returns its text.
func (r *contextRecorder) waitFor(t testing.TB, id string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		r.mu.Lock()
		text := r.items[id]
		r.mu.Unlock()
		if ok(text) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("SPEC 8: the model's context item %q reads %q", id, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
