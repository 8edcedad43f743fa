package wiretest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/jobs"
)

// fuzzSession is the one session FuzzSession drives, per process: a text agent, a host that
// holds a deferred job, and the connection the fuzzed frames go to.
type fuzzSession struct {
	b      *brokertest.Broker
	target *Conn
	callID string
	nonce  uint64 // in the sentinels' ids, which no input can know
	n      int
}

var (
	fuzzOnce sync.Once
	fuzzS    *fuzzSession
)

// FuzzSession drives a whole session over a real WebSocket with mutated frames (issue 15,
// SPEC 2): each input goes to a host connection of the session as one text message, followed
// by a sentinel frame. Nothing panics; the input gets at most one answer before the sentinel's,
// and one error when it is not a frame a client may send; the connection stays open; the
// session's other job — deferred on another host — is unaffected. Frames that end things by
// design (session.end, job.cancel) are not sent.
func FuzzSession(f *testing.F) {
	raw, err := os.ReadFile("../../frames/testdata/examples.json")
	if err != nil {
		f.Fatal(err)
	}
	var examples map[string]json.RawMessage
	if err := json.Unmarshal(raw, &examples); err != nil {
		f.Fatal(err)
	}
	for _, ex := range examples {
		f.Add([]byte(ex))
	}
	for _, seed := range []string{
		`{"type":"tool_progress","id":"p","handle":"fuzz-job","note":"x"}`,
		`{"type":"tool_result","id":"r","handle":"fuzz-job","output":{"a":[1,2,{"b":null}]}}`,
		`{"type":"tools.declare","id":"d","tools":[{"name":"t","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string","pattern":"^x+$"}}}}]}`,
		`{"type":"tool_deferred","id":"x","call_id":"call_aaaaaaaaaaaaaaaaaaaa","handle":"h"}`,
		"{\"type\":\"tool_progress\",\"id\":\"u\",\"handle\":\"\xff\",\"note\":\"x\"}",
		`{"type":"tool_partial_result","id":"q","call_id":"call_aaaaaaaaaaaaaaaaaaaa","segment":[[[[[[[[[[]]]]]]]]]],"interaction":{"prompt":"?"}}`,
		`[]`, `{}`, `{"type":null}`, ``,
	} {
		f.Add([]byte(seed))
	}
	fuzzOnce.Do(func() { fuzzS = startFuzzSession(f) })
	fs := fuzzS
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, decodeErr := frames.DecodeClient(data)
		if decodeErr == nil {
			switch fr.(type) {
			case *frames.SessionEnd, *frames.JobCancel:
				return // these end things by design
			}
		}
		fs.n++
		sentinel := fmt.Sprintf("end-%d-%x", fs.n, fs.nonce)
		before := len(fs.target.History())
		if err := fs.target.SendRaw(data); err != nil {
			t.Fatalf("send: %v", err)
		}
		// Only the methods that use no *testing.F: the connection is the process's, not the input's.
		if err := fs.target.SendRaw([]byte(`{"type":"fuzz.sentinel","id":"` + sentinel + `"}`)); err != nil {
			t.Fatalf("send: %v", err)
		}
		if _, err := fs.target.Wait(10*time.Second, TypeWith("error", "ref", sentinel)); err != nil {
			t.Fatalf("the sentinel after %.200q got no answer: %v", data, err)
		}
		answers := fs.target.History()[before:]
		answers = answers[:len(answers)-1] // the sentinel's own
		if len(answers) > 1 {
			t.Fatalf("%.200q got %d answers, want at most one: %v", data, len(answers), answers)
		}
		if decodeErr != nil && (len(answers) != 1 || answers[0].Type != "error") {
			t.Fatalf("%.200q (%v) got %v, want one error frame", data, decodeErr, answers)
		}
		if fs.target.IsClosed() {
			t.Fatalf("%.200q closed the connection", data)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		j, err := fs.b.Store.Job(ctx, brokertest.TenantA, fs.callID)
		if err != nil || j.State != jobs.Deferred || j.Handle != "fuzz-job" {
			t.Fatalf("after %.200q the other host's job is %+v (%v), want it still deferred", data, j, err)
		}
	})
}

// startFuzzSession starts the broker and the session of FuzzSession (no rate limit: the fuzzer
// sends as fast as it can).
func startFuzzSession(f *testing.F) *fuzzSession {
	cfg := broker.Config{BackgroundAfter: time.Hour, Limits: broker.Limits{FramesPerSecond: 1e9, FrameBurst: 1 << 30}}
	b := brokertest.Start(f, brokertest.Options{Store: "memory", Config: cfg})
	sid, jt := createSession(f, b, brokertest.KeyA)
	attach := func(name, role string, tools []map[string]any) *Conn {
		c := Dial(f, b.WSURL, name)
		m := map[string]any{"role": role, "session_id": sid, "join_token": jt}
		if tools != nil {
			m["tools"] = tools
		}
		if w := c.Hello(m); w.Type != "welcome" {
			f.Fatalf("%s: %s", name, w)
		}
		return c
	}
	agent := attach("agent", "agent", nil)
	owner := attach("owner", "host", []map[string]any{decl("work", "deferred", true, "timeout", "30s")})
	owner.Expect(Type("tools.declared"))
	agent.Send(map[string]any{"type": "agent.tool_call", "call_id": "a1", "conversation_id": "root", "name": "work", "arguments": map[string]any{}})
	callID := owner.Expect(Type("tool_call")).Str("call_id")
	owner.Send(map[string]any{"type": "tool_deferred", "id": "d", "call_id": callID, "handle": "fuzz-job"})
	if ack := owner.Expect(Type("tool_deferred_ack")); !ack.Bool("accepted") {
		f.Fatalf("the defer of the fuzz session's job: %s", ack)
	}
	return &fuzzSession{b: b, target: attach("target", "host", nil), callID: callID, nonce: rand.Uint64()}
}
