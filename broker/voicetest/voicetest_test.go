package voicetest

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestScripted runs every voice scenario with the scripted model (SPEC 19) over each store.
func TestScripted(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			Run(t, store, nil, true)
		})
	}
}

// TestShutdownWhileSpeaking shuts a node with the Redis store down while the agent speaks
// (SPEC 18: connections closed with 1012, the sessions live on to resume on another node,
// SPEC 15): the node must let go of the session's live parts — the model is closed and no
// goroutine of the voice side (the real-time playout) survives.
func TestShutdownWhileSpeaking(t *testing.T) {
	models := &modelTracker{}
	b := brokertest.Start(t, brokertest.Options{Store: "redis", Config: broker.Config{
		Models: map[string]model.Factory{"scripted": models.factory(scriptedModel)}}})
	vs := newVoiceSession(t, b, true)
	from := vs.say("say " + words("w", 60)) // 3.6 s of speech
	vs.caller.expectAudio(from)
	b.Close(false)
	if code := vs.caller.waitClosed(); code != broker.StatusServiceRestart {
		t.Errorf("caller closed with %d, want 1012 (SPEC 18)", code)
	}
	if open := models.waitClosed(3 * time.Second); open != 0 {
		t.Errorf("the session's model is still open after the node shut down")
	}
	expectNoVoiceGoroutine(t, "the node shut down")
}

// TestSessionEndWhileSpeaking ends a session (session.end, SPEC 3.6) while the agent speaks on a
// node that goes on running: the session must let go of its live voice parts at once — the
// model is closed and no goroutine of the voice side (the real-time playout) survives it.
func TestSessionEndWhileSpeaking(t *testing.T) {
	models := &modelTracker{}
	b := brokertest.Start(t, brokertest.Options{Store: "memory", Config: broker.Config{
		Models: map[string]model.Factory{"scripted": models.factory(scriptedModel)}}})
	vs := newVoiceSession(t, b, true)
	from := vs.say("say " + words("w", 60)) // 3.6 s of speech
	vs.caller.expectAudio(from)
	vs.end()
	vs.host.expect(typ("session.ended"))
	if open := models.waitClosed(3 * time.Second); open != 0 {
		t.Errorf("the session's model is still open after the session ended")
	}
	expectNoVoiceGoroutine(t, "the session ended")
}

// TestCallerDropWhileSpeaking drops the caller's transport while the agent speaks (SPEC 10: the
// session lives on for the resume window): what was playing can reach nobody, so the playout
// stops at once and leaves no goroutine behind, while the session and its model stay.
func TestCallerDropWhileSpeaking(t *testing.T) {
	models := &modelTracker{}
	b := brokertest.Start(t, brokertest.Options{Store: "memory", Config: broker.Config{
		ResumeWindow: 20 * time.Second,
		Models:       map[string]model.Factory{"scripted": models.factory(scriptedModel)}}})
	vs := newVoiceSession(t, b, true)
	from := vs.say("say " + words("w", 60)) // 3.6 s of speech
	vs.caller.expectAudio(from)
	vs.caller.cut()
	expectNoVoiceGoroutine(t, "the caller dropped")
	if open := models.waitClosed(0); open != 1 {
		t.Errorf("%d models open while the session lives on, want 1", open)
	}
}

// expectNoVoiceGoroutine waits up to 3 s for every goroutine of the broker's voice side to end.
func expectNoVoiceGoroutine(t *testing.T, after string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		stacks := allStacks()
		if !strings.Contains(stacks, "broker.(*voice)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine of the voice side survived after %s:\n%s", after, voiceStacks(stacks))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// voiceStacks keeps the goroutines of the broker's voice side.
func voiceStacks(all string) string {
	var out []string
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "broker.(*voice)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
