package faulttest

import (
	"math/rand/v2"
	"time"
)

// op is one step of an agent's schedule.
type op struct {
	kind   string // call, wait, wait2, wait_consumed, bare, bare2, cancel, cancel2, drop_host, drop_agent, pause
	tool   string // call: the host tool
	hostOp string // call: what the host does with it (hostActor.work)
	ms     int    // call: the host's delay; pause: the pause
}

// opWeights is the mix of a schedule: weight, op, and the range of ms.
var opWeights = []struct {
	w      int
	o      op
	lo, hi int
}{
	{10, op{kind: "call", tool: "quick", hostOp: "fast"}, 0, 0},
	{3, op{kind: "call", tool: "quick", hostOp: "error"}, 0, 0},
	{3, op{kind: "call", tool: "quick", hostOp: "double"}, 0, 0},
	{2, op{kind: "call", tool: "quick", hostOp: "nodefer"}, 0, 0},
	{8, op{kind: "call", tool: "slow", hostOp: "slow"}, 400, 1100},
	{3, op{kind: "call", tool: "slow", hostOp: "progress"}, 1200, 2200},
	{2, op{kind: "call", tool: "slow", hostOp: "never"}, 0, 0},
	{2, op{kind: "call", tool: "slow", hostOp: "late"}, 100, 400},
	{8, op{kind: "call", tool: "job", hostOp: "defer"}, 300, 1800},
	{3, op{kind: "call", tool: "job", hostOp: "defer_byid"}, 300, 1800},
	{2, op{kind: "call", tool: "job", hostOp: "defer_error"}, 200, 900},
	{2, op{kind: "call", tool: "job", hostOp: "defer_never"}, 0, 0},
	{3, op{kind: "call", tool: "job", hostOp: "defer_reuse"}, 200, 900},
	{2, op{kind: "call", tool: "job", hostOp: "defer_repeat"}, 300, 1200},
	{2, op{kind: "call", tool: "job", hostOp: "defer_hostcancel"}, 200, 800},
	{1, op{kind: "call", tool: "job", hostOp: "defer_late"}, 100, 300},
	{2, op{kind: "call", tool: "job", hostOp: "defer_slow"}, 400, 700},
	{1, op{kind: "call", tool: "job", hostOp: "defer_reserved"}, 100, 400},
	{8, op{kind: "wait"}, 0, 0},
	{2, op{kind: "wait2"}, 0, 0},
	{1, op{kind: "wait_consumed"}, 0, 0},
	{3, op{kind: "bare"}, 0, 0},
	{1, op{kind: "bare2"}, 0, 0},
	{5, op{kind: "cancel"}, 0, 0},
	{2, op{kind: "cancel2"}, 0, 0},
	{2, op{kind: "drop_host"}, 0, 0},
	{2, op{kind: "drop_agent"}, 0, 0},
	{4, op{kind: "pause"}, 100, 400},
}

// schedule draws n operations from r.
func schedule(r *rand.Rand, n int) []op {
	total := 0
	for _, w := range opWeights {
		total += w.w
	}
	ops := make([]op, n)
	for i := range ops {
		x := r.IntN(total)
		for _, w := range opWeights {
			if x < w.w {
				o := w.o
				if w.hi > w.lo {
					o.ms = w.lo + r.IntN(w.hi-w.lo)
				}
				ops[i] = o
				break
			}
			x -= w.w
		}
	}
	return ops
}

// runOps plays the agent's schedule; r also draws the targets of waits and cancels and the
// gaps between operations.
func (a *agentActor) runOps(r *rand.Rand, ops []op, tick func()) {
	for _, o := range ops {
		if a.l.isLost() || a.s.run.ctx.Err() != nil {
			return
		}
		a.do(r, o)
		a.checkStalls()
		tick()
		time.Sleep(time.Duration(10+r.IntN(110)) * time.Millisecond)
	}
}

func (a *agentActor) do(r *rand.Rand, o op) {
	bg := func(k *acall) bool { return k.placeholder && !k.consumed && !k.forgotten }
	open := func(k *acall) bool { return !k.consumed && !k.forgotten }
	switch o.kind {
	case "call":
		a.call(o.tool, map[string]any{"op": o.hostOp, "ms": o.ms})
	case "wait":
		if id := a.pick(r, bg); id != "" {
			a.call("wait", map[string]any{"tool_call_id": id})
		} else {
			a.call("wait", map[string]any{})
		}
	case "wait2":
		// Two waits for one call at once: one gets the result, the other "already being
		// waited for" (or both wait in turn).
		if id := a.pick(r, open); id != "" {
			a.call("wait", map[string]any{"tool_call_id": id})
			a.call("wait", map[string]any{"tool_call_id": id})
		}
	case "wait_consumed":
		if id := a.pick(r, func(k *acall) bool { return k.consumed }); id != "" {
			a.call("wait", map[string]any{"tool_call_id": id})
		}
	case "bare":
		a.call("wait", map[string]any{})
	case "bare2":
		a.call("wait", map[string]any{})
		a.call("wait", map[string]any{})
	case "cancel":
		if id := a.pick(r, open); id != "" {
			a.call("cancel", map[string]any{"tool_call_id": id})
		}
	case "cancel2":
		if id := a.pick(r, open); id != "" {
			a.call("cancel", map[string]any{"tool_call_id": id})
			a.call("cancel", map[string]any{"tool_call_id": id})
		}
	case "drop_host":
		a.s.host.l.drop()
	case "drop_agent":
		a.l.drop()
	case "pause":
		time.Sleep(time.Duration(o.ms) * time.Millisecond)
	}
}

// endPhase makes two calls that will still be open when the session ends (their jobs must
// be discarded: SPEC 3.6), then ends the session from the agent or the host.
func (s *sessionRun) endPhase(fromHost bool) {
	s.rec.note(-1, HarnessNote{Note: NoteEndPhase})
	for _, c := range []struct{ tool, op string }{{"slow", "never"}, {"job", "defer_never"}} {
		k := s.agent.call(c.tool, map[string]any{"op": c.op, "ms": 0})
		s.agent.mu.Lock()
		k.endPhase = true
		s.agent.mu.Unlock()
	}
	time.Sleep(500 * time.Millisecond)
	end := map[string]any{"type": "session.end", "id": "end-" + s.name}
	if fromHost {
		_ = s.host.l.send(end)
	} else {
		_ = s.agent.l.send(end)
	}
	deadline := time.After(10 * time.Second)
	for _, l := range []*link{s.host.l, s.agent.l} {
		select {
		case <-l.endedCh:
		case <-l.doneCh:
		case <-deadline:
			return
		}
	}
}
