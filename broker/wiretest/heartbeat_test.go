package wiretest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// disconnectOf returns the timeline's disconnect entries of the connection connID.
func disconnectOf(es []Entry, connID string) []Entry {
	var out []Entry
	for _, e := range find(es, "disconnect", "") {
		if e.Detail["connection_id"] == connID {
			out = append(out, e)
		}
	}
	return out
}

// TestHeartbeat covers SPEC 3.4 with a short interval (broker.Config.Heartbeat): the broker pings
// every heartbeat_ms and drops a transport after two missed pongs. A raw client that stops
// reading after its welcome never answers a ping: the broker drops it (a disconnect on the
// timeline, its TCP connection closed), no earlier than two full ping rounds after it attached,
// and its slot stays resumable (SPEC 10: a drop is not the end). Clients that keep reading over
// the same period answer every ping and are never dropped.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	const every = 300 * time.Millisecond
	b := brokertest.Start(t, brokertest.Options{Config: broker.Config{Heartbeat: every, ResumeWindow: 30 * time.Second}})
	s := newSession(t, b, brokertest.KeyA) // its text agent keeps reading
	live := s.host("live-host", decl("lookup"))
	if got := live.Welcome.Int("heartbeat_ms"); got != every.Milliseconds() {
		t.Fatalf("welcome heartbeat_ms %d, want %d (the configured interval)", got, every.Milliseconds())
	}

	// The silent client: a plain coder/websocket connection that reads its welcome and then
	// nothing more, so its pings are never answered.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, _, hc, err := DialWebSocket(ctx, b.WSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow(); hc.CloseIdleConnections() })
	hello, _ := HelloFrame(map[string]any{"role": "host", "session_id": s.sid, "join_token": s.jt})
	data, err := json.Marshal(hello)
	if err != nil {
		t.Fatal(err)
	}
	attached := time.Now() // before the broker can have started pinging it
	if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
	_, msg, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("silent client: reading the welcome: %v", err)
	}
	w := ParseFrame(msg)
	token, connID := w.Str("resume_token"), w.Str("connection_id")
	if w.Type != "welcome" || token == "" || connID == "" {
		t.Fatalf("silent client: hello answered %s", w)
	}

	// Dropped after two missed pongs: a ping goes out no earlier than one interval after the
	// connection attached, the next one no earlier than one interval after that, and each is
	// missed only when its interval passed without a pong.
	es := s.waitTimeline("disconnect of the silent client", func(es []Entry) bool { return len(disconnectOf(es, connID)) > 0 })
	drop := disconnectOf(es, connID)[0]
	if earliest := attached.Add(3 * every).UnixMilli(); drop.AtMS < earliest {
		t.Errorf("SPEC 3.4: silent client dropped %d ms after it attached, before two pings (interval %v) could have been missed",
			drop.AtMS-attached.UnixMilli(), every)
	}
	// The broker closed its transport: reading now ends with the connection, not the timeout.
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, _, err = ws.Read(rctx)
	rcancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent client: the broker did not close its connection after the drop (read: %v)", err)
	}

	// The live connections, over the same period and a few more intervals: never dropped.
	time.Sleep(3 * every)
	es = s.timeline()
	for _, c := range []*Conn{live, s.agent} {
		if d := disconnectOf(es, c.Welcome.Str("connection_id")); len(d) > 0 || c.IsClosed() {
			t.Errorf("SPEC 3.4: %s answers every ping but was dropped (%v):\n%s", c.Name, d, dumpEntries(es))
		}
	}
	id := nextID("decl-")
	live.Send(map[string]any{"type": "tools.declare", "id": id, "tools": []map[string]any{decl("lookup")}})
	if f := live.Expect("tools.declared"); f.Str("ref") != id {
		t.Errorf("live host: tools.declare answered %s", f)
	}

	// The dropped slot is resumable within its window.
	r, rw := s.resume("resumed", token, 0, nil)
	if rw.Type != "welcome" {
		t.Fatalf("SPEC 10: resuming the dropped slot answered %s, want welcome", rw)
	}
	if rw.Str("resume_token") == token {
		t.Errorf("SPEC 10: the resume token did not rotate")
	}
	r.Absent(2*every, "error")
}
