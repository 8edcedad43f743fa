package wiretest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// probe is one hostile (or valid) frame and the one answer it must get.
type probe struct {
	data []byte
	// want is the answer: "error:CODE", "ack:REASON" (a rejected tool_deferred_ack),
	// "cancel:RESULT" (job.cancel_result), or "" when the frame is answered with nothing.
	want string
	ref  string // the ref the answer carries ("" for none)
	desc string
}

// check tells what is wrong with f as the answer p wants ("" when nothing is).
func (p probe) check(f Frame) string {
	var ok bool
	kind, val, _ := strings.Cut(p.want, ":")
	switch kind {
	case "error":
		ok = f.Type == "error" && f.Str("code") == val && f.Str("message") != ""
	case "ack":
		ok = f.Type == "tool_deferred_ack" && !f.Bool("accepted") && f.Str("reason") == val
	case "cancel":
		ok = f.Type == "job.cancel_result" && f.Str("result") == val
	}
	if !ok {
		return fmt.Sprintf("want %s", p.want)
	}
	if f.Str("ref") != p.ref || (p.ref == "" && f.Has("ref")) {
		return fmt.Sprintf("want ref %q", p.ref)
	}
	return ""
}

// stormTarget is what the hostile frames may name: the session's real deferred job.
type stormTarget struct {
	callID, handle string
}

func nest(depth int, inner string) string {
	return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
}

// hostileProbe builds the i-th frame of a connection's storm.
func hostileProbe(rng *rand.Rand, conn, i int, tg stormTarget) probe {
	id := fmt.Sprintf("s%d-%d", conn, i)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	mk := func(want, ref, desc, format string, args ...any) probe {
		return probe{data: []byte(fmt.Sprintf(format, args...)), want: want, ref: ref, desc: desc}
	}
	switch k := rng.IntN(40); {
	case k < 4: // random bytes, often not even UTF-8
		b := make([]byte, rng.IntN(300))
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		if len(b) > 0 && b[0] == '{' {
			b[0] = '<'
		}
		return probe{data: b, want: "error:bad_frame", desc: "random bytes"}
	case k < 8: // truncated JSON of a valid frame: its id is read when the cut comes after it
		full := fmt.Sprintf(`{"type":"tool_progress","id":%s,"handle":%s,"note":"truncated %d"}`, q(id), q(tg.handle), i)
		cut := 1 + rng.IntN(len(full)-1)
		ref := ""
		if cut >= strings.Index(full, q(id))+len(q(id)) {
			ref = id
		}
		return probe{data: []byte(full[:cut]), want: "error:bad_frame", ref: ref, desc: "truncated JSON"}
	case k < 14: // wrong field types, missing fields, broken exactly-one rules
		forms := []string{
			`{"type":"tool_progress","id":%[1]s,"call_id":5,"note":"x"}`,
			`{"type":"tool_progress","id":%[1]s,"handle":%[2]s,"note":["x"]}`,
			`{"type":"tool_progress","id":%[1]s,"handle":%[2]s}`,
			`{"type":"tool_progress","id":%[1]s,"note":"neither call_id nor handle"}`,
			`{"type":"tool_progress","id":%[1]s,"handle":null,"note":"null handle"}`,
			`{"type":"tool_deferred","id":%[1]s,"call_id":{"a":1},"handle":"h"}`,
			`{"type":"tool_deferred","id":%[1]s,"call_id":%[3]s,"handle":["h"]}`,
			`{"type":"tool_deferred","id":%[1]s,"call_id":%[3]s}`,
			`{"type":"tool_result","id":%[1]s,"handle":%[2]s,"output":1,"error":"both"}`,
			`{"type":"tool_result","id":%[1]s,"handle":%[2]s}`,
			`{"type":"tool_result","id":%[1]s,"call_id":%[3]s,"handle":%[2]s,"output":1}`,
			`{"type":"tool_result","id":%[1]s,"handle":%[2]s,"error":false}`,
			`{"type":"job.cancel","id":%[1]s,"call_id":true}`,
			`{"type":"job.cancel","id":%[1]s}`,
			`{"type":"tools.declare","id":%[1]s,"tools":{"name":"x"}}`,
			`{"type":"tools.declare","id":%[1]s}`,
			`{"type":7,"id":%[1]s}`,
			`{"type":null,"id":%[1]s}`,
			`{"id":%[1]s,"call_id":%[3]s}`,
			`{"type":"tool_progress","id":%[1]s,"call_id":1e999,"note":"x"}`,
			`{"type":"tool_partial_result","id":%[1]s,"handle":%[2]s}`,
			`{"type":"tool_interaction_update","id":%[1]s,"handle":%[2]s,"interaction_id":"i","state":"exploded"}`,
			`{"type":"session.end","id":%[1]s,"extra":` + "\x00" + `}`,
		}
		f := forms[rng.IntN(len(forms))]
		return mk("error:bad_frame", id, "wrong types: "+f, f, q(id), q(tg.handle), q(tg.callID))
	case k < 17: // unknown frame types
		types := []string{"tool_explode", "", "TOOL_RESULT", "tool_result ", strings.Repeat("x", 5000), "hello\u0000", "__proto__", "😀", "tool_progress\n"}
		return mk("error:unknown_frame", id, "unknown type", `{"type":%s,"id":%s}`, q(types[rng.IntN(len(types))]), q(id))
	case k < 19: // frames only the broker sends, whole or in part: unknown_frame, saying so
		forms := []string{
			`{"type":"welcome","id":%[2]s,"session_id":"s","connection_id":"c","resume_token":"r","resume_window_ms":1,"heartbeat_ms":1,"server_time_ms":1}`,
			`{"type":"tool_call","id":%[2]s,"call_id":%[1]s,"name":"work","arguments":{},"deferred":true,"timeout_ms":1,"session_id":"s"}`,
			`{"type":"tool_call","id":%[2]s,"call_id":%[1]s,"name":"work","arguments":{}}`,
			`{"type":"session.ended","id":%[2]s,"reason":"ended"}`,
			`{"type":"tool_cancel","id":%[2]s,"call_id":%[1]s,"reason":"timeout"}`,
			`{"type":"error","id":%[2]s,"code":"internal","message":"x","retryable":true}`,
			`{"type":"tool_deferred_ack","id":%[2]s}`,
		}
		return mk("error:unknown_frame", id, "broker frame", forms[rng.IntN(len(forms))], q(tg.callID), q(id))
	case k < 21: // frames of another role: a host may not act as the agent
		forms := []string{
			`{"type":"agent.tool_call","id":%[1]s,"call_id":"evil","conversation_id":"root","name":"work","arguments":{}}`,
			`{"type":"agent.turn_start","id":%[1]s,"conversation_id":"root"}`,
			`{"type":"conversation.create","id":%[1]s,"parent_conversation_id":"root"}`,
			`{"type":"caller.text","id":%[1]s,"text":"call work {}"}`,
		}
		return mk("error:forbidden", id, "other role", forms[rng.IntN(len(forms))], q(id))
	case k < 22: // a second hello
		return mk("error:bad_frame", id, "second hello", `{"type":"hello","id":%s,"protocol":"backchannel.v1","role":"agent","api_key":"key-a"}`, q(id))
	case k < 28: // references to jobs that do not exist (or may not be touched)
		// JSON texts: a lone surrogate and bytes that are not UTF-8 included.
		handles := []string{q("no-such-handle"), `"\ud800lone"`, "\"bad\xffutf8\"", q(strings.Repeat("h", 128)), q(missingCallID)}
		h := handles[rng.IntN(len(handles))]
		unknown, cancelUnknown := "error:unknown_call", "cancel:unknown_call"
		if !utf8.ValidString(h) { // a frame that is not valid UTF-8 is bad_frame (SPEC 2)
			unknown, cancelUnknown = "error:bad_frame", "error:bad_frame"
		}
		switch rng.IntN(8) {
		case 0:
			return mk(unknown, id, "progress unknown handle", `{"type":"tool_progress","id":%s,"handle":%s,"note":"x"}`, q(id), h)
		case 1:
			return mk("error:unknown_call", id, "result unknown call", `{"type":"tool_result","id":%s,"call_id":%s,"output":{"__proto__":{"x":1}}}`, q(id), q(missingCallID))
		case 2:
			return mk(cancelUnknown, id, "cancel unknown handle", `{"type":"job.cancel","id":%s,"handle":%s}`, q(id), h)
		case 3:
			return mk("ack:unknown_call", id, "defer unknown call", `{"type":"tool_deferred","id":%s,"call_id":%s,"handle":"fresh-%d-%d"}`, q(id), q(missingCallID), conn, i)
		case 4: // the job went to another slot: no other slot may act for it (SPEC 11)
			return mk("error:forbidden", id, "defer another slot's job again", `{"type":"tool_deferred","id":%s,"call_id":%s,"handle":"steal-%d-%d"}`, q(id), q(tg.callID), conn, i)
		case 5:
			return mk("error:forbidden", id, "defer another slot's job with a control character", `{"type":"tool_deferred","id":%s,"call_id":%s,"handle":"a\u0000b"}`, q(id), q(tg.callID))
		case 6:
			return mk("error:unknown_call", id, "partial unknown call", `{"type":"tool_partial_result","id":%s,"call_id":%s,"segment":{"reply":true}}`, q(id), q(missingCallID))
		default:
			// deeper than 64 levels (SPEC 2), though within what encoding/json reads
			return mk("error:bad_frame", id, "progress unknown call, deep junk", `{"type":"tool_progress","id":%s,"call_id":%s,"note":"x","junk":%s}`, q(id), q(missingCallID), nest(500, "1"))
		}
	case k < 29: // nesting deeper than any decoder's limit (encoding/json stops at 10,000)
		return mk("error:bad_frame", id, "deep nesting", `{"type":"tool_progress","id":%s,"handle":%s,"note":"x","junk":%s}`, q(id), q(tg.handle), nest(10001+rng.IntN(2000), ""))
	case k < 32: // ids that are not strings of at most 64 bytes: no ref can be given
		ids := []string{q(strings.Repeat("i", 65)), "12", "{}", `["a"]`, "true"}
		idv := ids[rng.IntN(len(ids))]
		if rng.IntN(2) == 0 {
			return mk("error:unknown_frame", "", "bad id, unknown type", `{"type":"tool_explode","id":%s}`, idv)
		}
		return mk("error:bad_frame", "", "bad id", `{"type":"tool_progress","id":%s,"handle":"x","note":"x"}`, idv)
	case k < 34: // invalid tool declarations: nothing of them applies
		forms := []string{
			`{"type":"tools.declare","id":%s,"tools":[{"name":"wait","description":"d","parameters":{"type":"object"}}]}`,
			`{"type":"tools.declare","id":%s,"tools":[{"name":"bad name","description":"d","parameters":{"type":"object"}}]}`,
			`{"type":"tools.declare","id":%s,"tools":[{"name":"work","description":"d","parameters":{"type":"object"},"timeout":"121s"}]}`,
			`{"type":"tools.declare","id":%s,"tools":[{"name":"work","description":"d","parameters":{"type":"object"},"deferred_timeout":"1h"}]}`,
			`{"type":"tools.declare","id":%s,"tools":[{"name":"work","description":"d","parameters":{"type":17}}]}`,
			`{"type":"tools.declare","id":%s,"tools":[{"name":"work","description":"d","parameters":{"type":"object"}},{"name":"work","description":"d","parameters":{"type":"object"}}]}`,
		}
		return mk("error:bad_frame", id, "invalid declaration", forms[rng.IntN(len(forms))], q(id))
	case k < 36: // not objects
		forms := []string{"", "null", "[]", "{}", `"tool_progress"`, "42", "true", " ", "{\"type\":\"tool_progress\"", "}{"}
		return probe{data: []byte(forms[rng.IntN(len(forms))]), want: "error:bad_frame", desc: "not an object"}
	default: // well-formed progress on the real job, which went to another slot: forbidden (SPEC 11)
		return mk("error:forbidden", id, "progress on another slot's job", `{"type":"tool_progress","id":%s,"handle":%s,"note":"storm note %d-%d"}`, q(id), q(tg.handle), conn, i)
	}
}

// hugeProbe is a frame over the 1 MiB frame limit.
func hugeProbe(conn int) probe {
	note := strings.Repeat("A", 1<<20)
	return probe{data: []byte(fmt.Sprintf(`{"type":"tool_progress","id":"huge-%d","handle":"x","note":%q}`, conn, note)),
		want: "error:limit_exceeded", ref: "huge-" + fmt.Sprint(conn), desc: "frame over 1 MiB"}
}

// stormConn sends probes on a fresh host connection of the session, then a sentinel, and checks
// that every probe got exactly its answer, in order. It returns the number of frames sent.
func stormConn(t *testing.T, s *session, conn int, probes []probe) int {
	c, err := DialErr(t, s.b.WSURL, fmt.Sprintf("storm-%d", conn))
	if err != nil {
		t.Errorf("storm %d: %v", conn, err)
		return 0
	}
	defer c.Close()
	if err := c.SendErr(map[string]any{"type": "hello", "protocol": "backchannel.v1", "role": "host", "session_id": s.sid, "join_token": s.jt}); err != nil {
		t.Errorf("storm %d: hello: %v", conn, err)
		return 0
	}
	if w, err := c.Wait(DefaultTimeout, Type("welcome")); err != nil || w.Type != "welcome" {
		t.Errorf("storm %d: hello: %v", conn, err)
		return 0
	}
	sentinel := probe{data: []byte(fmt.Sprintf(`{"type":"storm.sentinel","id":"end-%d"}`, conn)), want: "error:unknown_frame", ref: fmt.Sprintf("end-%d", conn)}
	probes = append(probes, sentinel)
	for _, p := range probes {
		if err := c.SendRaw(p.data); err != nil {
			t.Errorf("storm %d: send: %v (the broker closed a connection within its limits?)", conn, err)
			return 0
		}
	}
	if _, err := c.Wait(DefaultTimeout, TypeWith("error", "ref", sentinel.ref)); err != nil {
		t.Errorf("storm %d: %v", conn, err)
		return len(probes)
	}
	var answers []Frame
	for _, f := range c.History() {
		if f.Type != "welcome" {
			answers = append(answers, f)
		}
	}
	k := 0
	for i, p := range probes {
		if p.want == "" {
			continue
		}
		if k >= len(answers) {
			t.Errorf("storm %d: probe %d (%s) got no answer", conn, i, p.desc)
			return len(probes)
		}
		if msg := p.check(answers[k]); msg != "" {
			t.Errorf("storm %d: probe %d (%s: %.120q) answered %.300s: %s", conn, i, p.desc, p.data, answers[k], msg)
			return len(probes)
		}
		k++
	}
	if k != len(answers) {
		t.Errorf("storm %d: %d answers for %d answerable probes; extra: %.300s", conn, len(answers), k, answers[k])
	}
	return len(probes)
}

// TestHostileInput sends more than 10,000 malformed or hostile frames over many connections of
// one session (SPEC 2): random bytes, truncated JSON, wrong field types, unknown and foreign
// types, bad ids, invalid declarations, frames over 1 MiB, deep nesting, and a flood past the
// rate limit — interleaved with valid work. Every frame within the limits gets exactly its
// answer (bad_frame, unknown_frame, forbidden, unknown_call, limit_exceeded, ...) in order with
// its ref; the flooding connection gets limit_exceeded and is closed with 1008, and a new
// connection carries on; afterwards the session, the deferred job accepted before the storm and
// the timeline are intact.
//
// It does not run in parallel with the other tests (which time clocks of 1 s), and runs its
// stores one after the other.
func TestHostileInput(t *testing.T) {
	// Every storm connection is a host slot of the one session: the quota of host slots is
	// raised past their number (TestHostSlotQuota tests it).
	cfg := broker.Config{BackgroundAfter: 30 * time.Second, Limits: broker.Limits{MaxHostSlots: 100}}
	eachStoreInTurn(t, cfg, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		h := s.host("host", decl("work", "deferred", true, "timeout", "30s"))
		jobID := s.deferJob(h, "a1", "work", "storm-job", "Surviving the storm")
		tg := stormTarget{callID: jobID, handle: "storm-job"}

		const conns, perConn = 52, 190 // within the burst of 200 frames of each connection
		var sent atomic.Int64
		var wg sync.WaitGroup
		// At most 8 storm connections at a time, so that the session's backlog (and so the
		// latency of every answer) stays bounded on a busy machine.
		slots := make(chan struct{}, 8)
		for c := 0; c < conns; c++ {
			rng := rand.New(rand.NewPCG(uint64(c), 0x5eed))
			probes := make([]probe, 0, perConn)
			for i := 0; i < perConn; i++ {
				probes = append(probes, hostileProbe(rng, c, i, tg))
			}
			if c%13 == 0 {
				probes[perConn/2] = hugeProbe(c)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots <- struct{}{}
				defer func() { <-slots }()
				sent.Add(int64(stormConn(t, s, c, probes)))
			}()
		}

		// A connection that floods past the rate limit: limit_exceeded, then close 1008.
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := DialErr(t, b.WSURL, "flood")
			if err != nil {
				t.Errorf("flood: %v", err)
				return
			}
			_ = f.SendErr(map[string]any{"type": "hello", "protocol": "backchannel.v1", "role": "host", "session_id": s.sid, "join_token": s.jt})
			if _, err := f.Wait(DefaultTimeout, Type("welcome")); err != nil {
				t.Errorf("flood: %v", err)
				return
			}
			n := 0
			for ; n < 5000 && !f.IsClosed(); n++ {
				if f.SendRaw([]byte(`{"type":"tool_progress","handle":"storm-job","note":"flood"}`)) != nil {
					break
				}
			}
			sent.Add(int64(n))
			status, err := f.WaitClosed(DefaultTimeout)
			if err != nil || status != websocket.StatusPolicyViolation {
				t.Errorf("flood of %d frames: closed with %d (%v), want 1008", n, status, err)
			}
			limited := 0
			for _, fr := range f.History() {
				if fr.Type == "error" && fr.Str("code") == "limit_exceeded" {
					limited++
				} else if fr.Type != "welcome" && (fr.Type != "error" || fr.Str("code") != "forbidden") { // the job is another slot's
					t.Errorf("flood: unexpected %s", fr)
				}
			}
			if limited == 0 {
				t.Errorf("flood of %d frames: closed with 1008, but no limit_exceeded reached the connection first (SPEC 2: a frame over a limit gets limit_exceeded)", n)
			}
			// A new connection with the join token carries on.
			again, err := DialErr(t, b.WSURL, "after-flood")
			if err != nil {
				t.Errorf("after flood: %v", err)
				return
			}
			_ = again.SendErr(map[string]any{"type": "hello", "protocol": "backchannel.v1", "role": "host", "session_id": s.sid, "join_token": s.jt})
			if _, err := again.Wait(DefaultTimeout, Type("welcome")); err != nil {
				t.Errorf("after flood: %v", err)
				return
			}
			_ = again.SendErr(`{"type":"tool_progress","id":"ok","handle":"storm-job","note":"after the flood"}`)
			_ = again.SendErr(`{"type":"after.flood","id":"af"}`)
			if e, err := again.Wait(DefaultTimeout, Type("error")); err != nil || e.Str("code") != "forbidden" || e.Str("ref") != "ok" {
				t.Errorf("after flood: %s %v, want forbidden for the progress on another slot's job", e, err)
			}
			if e, err := again.Wait(DefaultTimeout, TypeWith("error", "ref", "af")); err != nil || e.Str("code") != "unknown_frame" {
				t.Errorf("after flood: %s %v, want unknown_frame for af", e, err)
			}
			sent.Add(2)
		}()

		// Valid work while the storm runs: calls answered in the foreground, progress on the job.
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("v%d", i)
			tc := s.call(h, id, "work")
			h.Send(map[string]any{"type": "tool_progress", "handle": "storm-job", "note": "host note " + id})
			result(h, tc.Str("call_id"), "", fmt.Sprintf(`{"i":%d}`, i))
			if r := s.agentResult(id); r.Str("kind") != "result" || bodyOf(r.Str("content")) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Errorf("call during the storm: %s", r)
			}
		}
		wg.Wait()
		if n := sent.Load(); n < 10000 {
			t.Errorf("only %d hostile frames sent", n)
		}
		t.Logf("%d frames sent over %d connections", sent.Load(), conns+2)

		// The session is intact: the host and the agent are still there and saw nothing of it.
		for _, f := range h.History() {
			if f.Type != "welcome" && f.Type != "tools.declared" && f.Type != "tool_call" && f.Type != "tool_deferred_ack" {
				t.Errorf("the host got %s during the storm", trunc(f.String(), 300))
			}
		}
		if h.IsClosed() || s.agent.IsClosed() {
			t.Fatalf("the storm closed the session's host or agent")
		}
		// The deferred job accepted before the storm completes through its handle.
		result(h, "", "storm-job", `"weathered"`)
		h.Absent(200*time.Millisecond, Type("error"))
		if r := s.waitResult("a1"); r.Str("kind") != "result" || bodyOf(r.Str("content")) != "weathered" {
			t.Errorf("the deferred job after the storm: %s", r)
		}
		es := s.timeline()
		for _, kind := range []string{"call", "deferred", "progress", "result"} {
			if len(find(es, kind, jobID)) == 0 {
				t.Errorf("no %s entry for the storm job", kind)
			}
		}
		if n := len(find(es, "call", "")); n != 6 {
			t.Errorf("%d call entries, want 6 (no hostile frame started a call)", n)
		}
		for _, e := range es {
			if e.Kind == "cancel" || e.Kind == "session_end" {
				t.Errorf("the storm left %v", e)
			}
		}
		// No hostile declaration applied: a call of "work" still reaches the host.
		tc := s.call(h, "after", "work")
		result(h, tc.Str("call_id"), "", `"calm"`)
		if r := s.agentResult("after"); r.Str("content") != "calm" {
			t.Errorf("call after the storm: %s", r)
		}
	})
}

// TestRateLimit covers the frame rate limit of SPEC 2 (100 frames/s, burst 200): frames past the
// rate get limit_exceeded, the connection survives a short excess and carries on once the rate
// allows; a connection that keeps exceeding gets limit_exceeded and is closed with 1008 after
// the answers to the frames it was allowed.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	eachStore(t, broker.Config{}, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		c := s.host("burst")
		start := time.Now()
		const n = 260
		for i := 0; i < n; i++ {
			c.Send(fmt.Sprintf(`{"type":"rate.probe","id":"r%d"}`, i))
		}
		// Every one of them is answered: unknown_frame (with its ref) within the burst,
		// limit_exceeded past it.
		answered, limited := 0, 0
		var lastAt time.Time
		for answered+limited < n {
			f := c.Expect(Type("error"))
			switch {
			case f.Str("code") == "unknown_frame" && strings.HasPrefix(f.Str("ref"), "r"):
				answered++
			case f.Str("code") == "limit_exceeded":
				limited++
			default:
				t.Fatalf("answer %s", f)
			}
			lastAt = f.At
		}
		// The broker read them within [start, lastAt]: the burst and at most 100 frames/s more
		// are answered, the rest are limit_exceeded (how many depends on how fast it read).
		allowed := 200 + int(lastAt.Sub(start).Seconds()*100) + 2
		if answered < 200 || answered > allowed {
			t.Errorf("%d frames in %v: %d answered, %d limit_exceeded; want the burst of 200 and at most %d answered", n, lastAt.Sub(start), answered, limited, allowed)
		}
		// The connection survives the excess and carries on once the rate allows.
		var after Frame
		for i := 0; i < 30 && after.Type == ""; i++ {
			time.Sleep(50 * time.Millisecond)
			c.Send(fmt.Sprintf(`{"type":"rate.after","id":"after-%d"}`, i))
			f := c.Expect(Type("error"))
			if f.Str("code") == "unknown_frame" {
				after = f
			} else if f.Str("code") != "limit_exceeded" {
				t.Fatalf("answer %s", f)
			}
		}
		if after.Type == "" || c.IsClosed() {
			t.Fatalf("the connection did not carry on after a short excess")
		}

		// Keep exceeding: the frames within the burst are answered, the others get limit_exceeded,
		// then the connection is closed with 1008 — after those answers.
		f := s.host("flood")
		sent := 0
		for ; sent < 5000; sent++ {
			if f.SendErr(fmt.Sprintf(`{"type":"rate.flood","id":"f%d"}`, sent)) != nil {
				break
			}
		}
		f.ExpectClosed(websocket.StatusPolicyViolation)
		answered, limited = 0, 0
		for _, fr := range f.History() {
			switch {
			case fr.Type == "error" && fr.Str("code") == "unknown_frame" && strings.HasPrefix(fr.Str("ref"), "f"):
				answered++
			case fr.Type == "error" && fr.Str("code") == "limit_exceeded":
				limited++
			}
		}
		if answered < 200 || limited == 0 {
			t.Errorf("a connection closed with 1008 for flooding (%d frames sent) got %d answers to the 200 frames of its burst and %d limit_exceeded before the close; want all 200 and at least one limit_exceeded", sent, answered, limited)
		}
	})
}

// TestRateLimitConfigured checks the rate limit with limits low enough (burst 20, 2 frames/s, 30
// violations in a row) that the outcome does not depend on how fast the broker reads.
func TestRateLimitConfigured(t *testing.T) {
	t.Parallel()
	cfg := broker.Config{Limits: broker.Limits{FrameBurst: 20, FramesPerSecond: 2, MaxViolations: 30}}
	eachStore(t, cfg, func(t *testing.T, b *brokertest.Broker) {
		s := newSession(t, b, brokertest.KeyA)
		c := s.host("limited")
		start := time.Now()
		const n = 45
		for i := 0; i < n; i++ {
			c.Send(fmt.Sprintf(`{"type":"rate.probe","id":"r%d"}`, i))
		}
		var answers []Frame
		for len(answers) < n {
			answers = append(answers, c.Expect(Type("error")))
		}
		el := answers[n-1].At.Sub(start)
		answered := 0
		for i, f := range answers {
			if ref := fmt.Sprintf("r%d", i); f.Str("ref") != ref {
				t.Errorf("answer %d: %s, want ref %s (SPEC 2: an answer carries its frame's id)", i, f, ref)
			}
			switch {
			case f.Str("code") == "unknown_frame":
				answered++
			case f.Str("code") == "limit_exceeded":
				if i < 20 {
					t.Errorf("frame %d of the burst of 20 got %s", i, f)
				}
			default:
				t.Errorf("answer %s", f)
			}
		}
		if allowed := 20 + int(el.Seconds()*2) + 1; answered < 20 || answered > allowed {
			t.Errorf("%d frames in %v: %d answered, want the burst of 20 and at most %d", n, el, answered, allowed)
		}
		if c.IsClosed() {
			t.Fatalf("%d violations (under 30 in a row) closed the connection", n-answered)
		}
		time.Sleep(600 * time.Millisecond) // one frame's worth of rate
		c.Send(`{"type":"rate.after","id":"after"}`)
		if f := c.Expect(Type("error")); f.Str("code") != "unknown_frame" || f.Str("ref") != "after" {
			t.Errorf("after a pause: %s, want unknown_frame with ref", f)
		}
	})
}
