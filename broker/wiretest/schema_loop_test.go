package wiretest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// holdCompile holds the compilation of every schema whose text contains a marker until the
// marker is released (or 30 s passed), and reports when one started.
type holdCompile struct {
	mu      sync.Mutex
	markers map[string]*held
}

type held struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (hc *holdCompile) hook(schema []byte) {
	hc.mu.Lock()
	var h *held
	for m, v := range hc.markers {
		if bytes.Contains(schema, []byte(m)) {
			h = v
		}
	}
	hc.mu.Unlock()
	if h == nil {
		return
	}
	h.once.Do(func() { close(h.started) })
	select {
	case <-h.release:
	case <-time.After(30 * time.Second): // the broker must shut down even when a test failed
	}
}

func (hc *holdCompile) add(marker string) *held {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	h := &held{started: make(chan struct{}), release: make(chan struct{})}
	hc.markers[marker] = h
	return h
}

// expensiveSchema is one of the most expensive schemas to compile the bounds allow (255
// references to the root; docs/BENCHMARKS.md), marked.
func expensiveSchema(marker string) string {
	return `{"$comment":"` + marker + `","anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#"},`, 254), ",") + `]}`
}

// TestSchemaCompileOffTheLoop (issue 15.1): a declaration's schemas compile on its own
// connection's goroutine, not on the session loop. While one connection's compilation is held
// (a test hook: it does not go on until the test says so), another connection's job.cancel on the
// same session is answered, and so is the hello of a third; the declaring connection's own
// frames stay in order — its tools.declared comes before the answer to the frame it sent next.
func TestSchemaCompileOffTheLoop(t *testing.T) {
	t.Parallel()
	hc := &holdCompile{markers: map[string]*held{}}
	broker.SetCompileHook(hc.hook)
	t.Cleanup(func() { broker.SetCompileHook(nil) })
	eachStore(t, broker.Config{BackgroundAfter: 30 * time.Second}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		worker := s.host("worker", decl("job", "timeout", "60s"))
		call := s.call(worker, "to-cancel", "job")
		declarer := s.host("declarer")

		marker := nextID("held-declare-")
		hold := hc.add(marker)
		id := nextID("decl-")
		declarer.Send(map[string]any{"type": "tools.declare", "id": id, "tools": []any{decl("slow", "parameters", rawJSON(expensiveSchema(marker)))}})
		next := nextID("after-")
		declarer.Send(map[string]any{"type": "job.cancel", "id": next, "call_id": missingCallID})
		<-hold.started

		// The compilation is held: the session still answers another connection.
		cid := nextID("cancel-")
		worker.Send(map[string]any{"type": "job.cancel", "id": cid, "call_id": call.Str("call_id")})
		if r := worker.Expect(TypeWith("job.cancel_result", "ref", cid)); r.Str("result") != "cancelled" {
			t.Errorf("job.cancel during another connection's compilation: %s", r)
		}
		// And a hello whose tools compile, held too, does not hold the session either.
		helloMarker := nextID("held-hello-")
		helloHold := hc.add(helloMarker)
		third := Dial(t, b.WSURL, "third")
		hid := nextID("hello-")
		third.SendHello(map[string]any{"id": hid, "role": "host", "session_id": s.sid, "join_token": s.jt,
			"tools": []any{decl("slow2", "parameters", rawJSON(expensiveSchema(helloMarker)))}})
		<-helloHold.started
		s.agentCall("during-hello", "job", map[string]any{"n": "during-hello"})
		worker.Expect(callFor("during-hello"))

		close(hold.release)
		if d := declarer.Next(); d.Type != "tools.declared" || d.Str("ref") != id {
			t.Errorf("the declarer's next frame is %s, want tools.declared with ref %s", d, id)
		}
		if e := declarer.Next(); e.Str("ref") != next {
			t.Errorf("then %s, want the answer to %s", e, next)
		}
		close(helloHold.release)
		if w := third.ExpectWelcome(); w.Str("ref") != hid {
			t.Errorf("welcome %s", w)
		}
		if d := third.Next(); d.Type != "tools.declared" || d.Str("ref") != hid {
			t.Errorf("the hello's tools: %s, want tools.declared right after the welcome", d)
		}
	})
}
