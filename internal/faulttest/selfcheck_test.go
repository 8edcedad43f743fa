package faulttest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestSelfCheck checks the checker on real runs: the one-node memory mode through a proxy
// that passes everything on reports nothing; through a proxy that drops and duplicates a few
// of the broker's frames, and on recorded histories mutated in place, it reports violations.
func TestSelfCheck(t *testing.T) {
	t.Parallel()
	cfg := Config{Mode: ModeMemory, Seed: 7, Sessions: 4, Ops: 25, Quiesce: 15 * time.Second, Mutate: &Mutation{}}
	clean := Run(t, brokerBin, cfg)
	if len(clean.Violations) > 0 {
		t.Errorf("through a plain proxy the run reports violations:\n%s", Summarize(clean.Violations, 3))
	}

	t.Run("proxy drops and duplicates frames", func(t *testing.T) {
		cfg := cfg
		cfg.Quiesce = 6 * time.Second
		cfg.Mutate = &Mutation{Drop: 0.03, Dup: 0.03}
		res := Run(t, brokerBin, cfg)
		if res.Stats.Mutations == 0 {
			t.Fatal("the proxy mutated nothing")
		}
		k := kinds(res.Violations)
		if k[KindSeqGap] == 0 || k[KindSeqRepeat] == 0 {
			t.Errorf("%d frames dropped or duplicated, want seq-gap and seq-repeat violations, got %v", res.Stats.Mutations, k)
		}
	})

	mutations := []struct {
		name   string
		want   string
		mutate func(h *History) bool
	}{
		{"a frame removed", KindSeqGap, func(h *History) bool {
			for i, e := range h.Events {
				if e.Dir == Recv && parseFrame(e.Raw).Type == "tool_call" {
					h.Events = append(h.Events[:i:i], h.Events[i+1:]...)
					return true
				}
			}
			return false
		}},
		{"an output forged", KindOutcomeMismatch, func(h *History) bool {
			for i, e := range h.Events {
				f := parseFrame(e.Raw)
				if e.Dir == Recv && f.Type == "agent.tool_result" && f.str("kind") == "result" && bytes.HasPrefix([]byte(f.str("content")), []byte("ok-")) {
					h.Events[i].Raw = setMember(e.Raw, "content", "ok-forged")
					return true
				}
			}
			return false
		}},
		{"a result consumed but never delivered", KindPhantomConsumed, func(h *History) bool {
			waits := map[string]bool{}
			for _, e := range h.Events {
				f := parseFrame(e.Raw)
				if e.Dir == Sent && f.Type == "agent.tool_call" && f.str("name") == "wait" && f.obj("arguments")["tool_call_id"] != nil {
					waits[f.str("call_id")] = true
				}
			}
			for i, e := range h.Events {
				f := parseFrame(e.Raw)
				if e.Dir == Recv && f.Type == "agent.tool_result" && waits[f.str("call_id")] && f.str("kind") == "result" &&
					parseContent(f.str("content")).headers["wait_outcome"] == "" {
					h.Events[i].Raw = setMember(e.Raw, "content", "error: "+msgAlreadyConsumed)
					return true
				}
			}
			return false
		}},
		{"a tool_cancel's reason changed", KindOutcomeMismatch, func(h *History) bool {
			for i, e := range h.Events {
				f := parseFrame(e.Raw)
				if e.Dir == Recv && f.Type == "tool_cancel" && f.str("reason") == "timeout" {
					h.Events[i].Raw = setMember(e.Raw, "reason", "host_request")
					return true
				}
			}
			return false
		}},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			hs := make([]History, len(clean.Histories))
			done := false
			for i, h := range clean.Histories {
				h.Events = append([]Event(nil), h.Events...)
				if !done && m.mutate(&h) {
					done = true
				}
				hs[i] = h
			}
			if !done {
				t.Fatalf("the run has nothing to mutate for %q", m.name)
			}
			if k := kinds(Check(hs)); k[m.want] == 0 {
				t.Errorf("want a %s violation, got %v", m.want, k)
			}
		})
	}
}

// setMember returns the frame raw with member k set to the string v.
func setMember(raw []byte, k, v string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	b, _ := json.Marshal(v)
	m[k] = b
	out, _ := json.Marshal(m)
	return out
}
