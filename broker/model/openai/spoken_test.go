package openai

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// TestVoiceSpokenPermission runs a real broker with the adapter as its model and answers a
// spoken-permission ask (SPEC 12) by voice: the caller's µ-law audio goes to the Realtime
// server, whose transcription of the turn comes back as the caller's final transcript. The
// broker echoes it to the caller, judges it as the reply to the ask, and dispatches the call.
// (The other voice scenarios type their turns with caller.text; this is the path of a real
// caller.)
func TestVoiceSpokenPermission(t *testing.T) {
	srv := sim.New(sim.Options{APIKey: testKey})
	t.Cleanup(func() {
		srv.Close()
		checkEvents(t, srv.Events())
	})
	newModel := New(Options{URL: srv.URL(), APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	b := brokertest.Start(t, brokertest.Options{Config: broker.Config{
		Models: map[string]model.Factory{"openai": newModel}, DefaultModel: "openai"}})

	host := dialPeer(t, b.WSURL)
	host.send(map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "host", "api_key": brokertest.KeyA, "id": "h1",
		"tools": []map[string]any{{"name": "pay", "description": "Pays an amount.", "requires_permission": true,
			"parameters": map[string]any{"type": "object"}}}})
	w := host.wait("the host's welcome", frameOf("welcome"))
	host.wait("tools.declared", frameOf("tools.declared", "ref", "h1"))
	sid, _ := w["session_id"].(string)
	join, _ := w["join_token"].(string)
	caller := dialPeer(t, b.WSURL)
	caller.send(map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "caller", "session_id": sid, "join_token": join})
	caller.wait("the caller's welcome", frameOf("welcome"))

	caller.send(map[string]any{"type": "caller.text", "text": `call pay {"amount":5}`})
	ask := caller.wait("the permission ask", func(f map[string]any) bool {
		return f["type"] == "transcript" && f["role"] == "agent" && f["final"] == true
	})
	if want := `Shall I run pay with {"amount":5}? Please say yes or no.`; ask["text"] != want {
		t.Errorf("the ask said %q, want %q", ask["text"], want)
	}
	for _, f := range host.all() {
		if f["type"] == "tool_call" {
			t.Fatalf("SPEC 12: the host got the call before the caller's answer: %v", f)
		}
	}

	// Once the ask has been heard to its end (its transcript is final before its audio has
	// played out), the caller answers by voice: 400 ms of speech, then silence until the
	// server's VAD ends the turn and transcribes it.
	caller.waitQuiet(300 * time.Millisecond)
	srv.Transcribe("yes")
	talk(t, caller, g711.Tone(300, 20, 0.5), 20)
	talk(t, caller, g711.Silence(20), 60)

	echo := caller.wait("the caller's transcript of the spoken answer", frameOf("transcript", "role", "caller", "text", "yes"))
	if echo["final"] != true {
		t.Errorf("the caller's transcript %v, want it final", echo)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("caller frames: %v", caller.all())
			t.Logf("timeline: %v", timeline(t, b, sid))
		}
	})
	host.wait("the approved call", frameOf("tool_call", "name", "pay"))
	var verdict, reply string
	deadline := time.Now().Add(waitFor)
	for verdict == "" && time.Now().Before(deadline) {
		for _, e := range timeline(t, b, sid) {
			if e.Kind == "permission" {
				verdict, _ = e.Detail["verdict"].(string)
				reply, _ = e.Detail["transcript"].(string)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if verdict != "approve" || reply != "yes" {
		t.Errorf("timeline permission %q on %q, want approve on the spoken yes", verdict, reply)
	}
	host.send(map[string]any{"type": "session.end"})
	host.wait("session.ended", frameOf("session.ended"))
}

// talk sends frame n times as the caller's audio, one binary message every 20 ms (real time,
// as a phone does).
func talk(t *testing.T, p *peer, frame []byte, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range n {
		if err := p.ws.Write(ctx, websocket.MessageBinary, frame); err != nil {
			t.Fatal(err)
		}
		<-tick.C
	}
}
