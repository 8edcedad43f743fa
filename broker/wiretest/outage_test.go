package wiretest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/redistest"
)

// TestRedisOutage stops the broker's Redis in the middle of a job (SPEC 2.1, 15). A short outage
// is bridged by the engine's retry: the defer sent while Redis was down is applied once it is
// back and acknowledged as accepted. A longer one answers the frame with error internal,
// retryable, naming the job, once the answer can be journaled — while the connection, the
// session and the job survive — and the same frame sent again after Redis is back is applied:
// the agent gets the result.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	// Its own server, which the test stops; with the AOF (fsync always), a killed server loses
	// nothing, as in production.
	srv := redistest.Start(t, redistest.Options{AOF: true})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() }) // after the broker's shutdown (cleanups run last first)
	b := brokertest.Start(t, brokertest.Options{Store: "redis", Redis: client})
	s := newSession(t, b, brokertest.KeyA)
	h := s.host("host", decl("export", "deferred", true))
	callID := s.call(h, "c1", "export").Str("call_id")

	// Down for less than the engine's store retry (3 s): the defer waits and goes through.
	srv.Kill()
	h.Send(map[string]any{"type": "tool_deferred", "id": "def-1", "call_id": callID, "handle": "h-export"})
	time.Sleep(700 * time.Millisecond)
	srv.Restart()
	ack := h.Expect(func(f Frame) bool { return f.Type == "tool_deferred_ack" || f.Type == "error" })
	if ack.Type != "tool_deferred_ack" || ack.Str("ref") != "def-1" {
		t.Fatalf("a defer sent while Redis was down for 0.7 s: %s, want its tool_deferred_ack", ack)
	}
	wantAck(t, ack, true, "")
	s.agent.Expect(TypeWith("agent.tool_result", "call_id", "c1", "kind", "background_placeholder"))

	// Down for longer: the result is refused with a retryable internal error about the job. The
	// refusal is a frame of the host's outbox like any other: no connection sees it before the
	// journal has it (SPEC 15), so it arrives once Redis is back — never a seq a node that takes
	// the session over would lack.
	srv.Kill()
	h.Send(map[string]any{"type": "tool_result", "id": "res-1", "handle": "h-export", "output": "done"})
	// Redis stays down until the broker has made the refusal (it counts the error frame as it
	// enters the outbox); none reaches the host before Redis is back.
	for deadline := time.Now().Add(30 * time.Second); internalErrors(t, b) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the broker made no refusal of the result within 30 s of Redis going down")
		}
	}
	h.Absent(300*time.Millisecond, TypeWith("error", "ref", "res-1"))
	srv.Restart()
	e := h.ExpectWithin(10*time.Second, TypeWith("error", "ref", "res-1"))
	if e.Str("code") != "internal" || !e.Bool("retryable") || e.Str("handle") != "h-export" {
		t.Errorf("a result while Redis stayed down: %s, want error internal, retryable, with the handle", e)
	}
	h.Send(map[string]any{"type": "tool_result", "id": "res-2", "handle": "h-export", "output": "done"})
	h.Absent(300*time.Millisecond, TypeWith("error", "ref", "res-2"))
	if r := s.waitResult("c1"); r.Str("kind") != "result" || !strings.HasSuffix(r.Str("content"), "\ndone") {
		t.Errorf("the agent's wait after Redis came back: %s, want the result done", r)
	}
	s.waitTimeline("the result", func(es []Entry) bool {
		for _, e := range es {
			if e.Kind == "result" && e.Handle == "h-export" {
				return true
			}
		}
		return false
	})
}

// internalErrors is how many error frames of code internal the broker made so far.
func internalErrors(t *testing.T, b *brokertest.Broker) int { return errorFrames(t, b, "internal") }

// errorFrames is how many error frames of code the broker made so far (its /metrics, which
// needs no store).
func errorFrames(t *testing.T, b *brokertest.Broker, code string) int {
	t.Helper()
	_, _, body := HTTPDo(t, "GET", b.URL+"/metrics", "", "", "")
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `backchannel_error_frames_total{code="`+code+`"} `); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
