package textagent

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// waitRequest is a blocked `wait`.
type waitRequest struct {
	mode   string // WaitModeExact or WaitModeAnyBackground
	target *call  // the call an exact wait is for
}

// timedWait is a blocked `wait {timeout_minutes}`.
type timedWait struct {
	k     *call
	until time.Time // its deadline
	stop  func()
}

// waitCall runs the built-in `wait` in its three forms (SPEC 13). It never goes to the
// background: it answers at once or blocks until its result is there.
func (a *Agent) waitCall(k *call, raw json.RawMessage) {
	c := k.conv
	args := map[string]json.RawMessage{}
	_ = json.Unmarshal(raw, &args)
	if id, ok := args["tool_call_id"]; ok {
		a.waitExact(k, jsonString(id))
		return
	}
	if n, ok := args["timeout_minutes"]; ok {
		minutes, ok := positiveInteger(n)
		if !ok {
			a.answerNow(k, ErrorResult(MsgTimeoutMinutesInvalid))
			return
		}
		a.waitTimed(k, min(max(minutes, a.opts.MinWaitMinutes), a.opts.MaxWaitMinutes))
		return
	}
	// The bare form: the oldest unconsumed completed result of this conversation.
	switch {
	case c.bare != nil:
		a.answerNow(k, ErrorResult(MsgBareWaitAlreadyPending))
	case c.activatingPending(nil):
		a.answerNow(k, Interrupted(WaitModeAnyBackground))
	case len(c.done) > 0:
		d := c.done[0]
		a.consume(d)
		a.answerNow(k, withHeader(*d.outcome, HeaderOriginalToolCallID, d.id))
	case c.runningBackground():
		k.wait = &waitRequest{mode: WaitModeAnyBackground}
		c.bare = k
	default:
		a.answerNow(k, ErrorResult(MsgNoBackgroundToolCall))
	}
}

// waitExact is `wait {tool_call_id}`: the result of that call of this conversation, once.
func (a *Agent) waitExact(k *call, id string) {
	c := k.conv
	t := c.calls[id]
	switch {
	case t == nil || t.builtin:
		a.answerNow(k, withHeader(ErrorResult(MsgUnknownToolCallID), HeaderToolCallID, id))
	case t.consumed:
		a.answerNow(k, ErrorResult(MsgResultAlreadyConsumed))
	case t.waiter != nil:
		a.answerNow(k, ErrorResult(MsgResultAlreadyWaitedFor))
	case c.activatingPending(t):
		a.answerNow(k, Interrupted(WaitModeExact))
	case t.finished && t.outcome != nil:
		a.consume(t)
		a.answerNow(k, *t.outcome)
	default:
		// Still running: a call waited for is a background call (it gets its placeholder now if
		// it had none yet), and its result will go to this wait.
		a.toBackground(t)
		t.waiter = k
		k.wait = &waitRequest{mode: WaitModeExact, target: t}
		c.exact[k] = true
	}
}

// waitTimed is `wait {timeout_minutes}`: it returns when activating input arrives, or when the
// deadline passes, and consumes nothing.
func (a *Agent) waitTimed(k *call, minutes int) {
	c := k.conv
	if c.activatingPendingAny() {
		a.timedOver(k, false)
		return
	}
	if c.timed != nil {
		a.timedOver(c.timed.k, false) // a newer timed wait replaces the older one
	}
	a.armTimed(k, time.Duration(minutes)*time.Minute)
}

// armTimed installs k as its conversation's timed wait, returning timed_out after d.
func (a *Agent) armTimed(k *call, d time.Duration) {
	c := k.conv
	tw := &timedWait{k: k, until: a.env.Now().Add(d)}
	tw.stop = a.env.After(max(d, 0), func() {
		if c.timed == tw {
			a.timedOver(k, true)
		}
	})
	c.timed = tw
}

// timedOver answers a timed wait: input_available, or timed_out (with the advice on the third
// timeout of a run, unless the status is waiting).
func (a *Agent) timedOver(k *call, timedOut bool) {
	c := k.conv
	if c.timed != nil && c.timed.k == k {
		c.timed.stop()
		c.timed = nil
	}
	var out Content
	if !timedOut {
		c.timeouts, c.adviceGiven = 0, false
		a.answerNow(k, *out.Set(HeaderInputAvailable, ValueTrue))
		return
	}
	c.timeouts++
	out.Set(HeaderTimedOut, ValueTrue)
	if c.timeouts >= 3 && !c.adviceGiven && c.status != StatusWaiting {
		c.adviceGiven = true
		out.Set(HeaderAdvice, AdviceTimedWaits)
	}
	a.answerNow(k, out)
}

// interruptWaits answers the blocked waits of a conversation that received activating input p
// (SPEC 13): exact and bare waits return interrupted, a timed wait returns input_available.
func (a *Agent) interruptWaits(c *conversation, p *prompt) {
	for w := range c.exact {
		if interrupts(p, w.wait.target) {
			a.answerWait(w, Interrupted(WaitModeExact))
		}
	}
	if w := c.bare; w != nil && interrupts(p, nil) {
		a.answerWait(w, Interrupted(WaitModeAnyBackground))
	}
	if tw := c.timed; tw != nil {
		a.timedOver(tw.k, false)
	}
}

// answerWait answers a blocked wait and releases what it held.
func (a *Agent) answerWait(w *call, out Content) {
	w.unblock()
	a.answerNow(w, out)
}

// unblock uninstalls a blocked exact or bare wait: its target may be waited for again, and
// its conversation may install another bare wait.
func (w *call) unblock() {
	r := w.wait
	if r == nil {
		return
	}
	c := w.conv
	if r.target != nil && r.target.waiter == w {
		r.target.waiter = nil
	}
	delete(c.exact, w)
	if c.bare == w {
		c.bare = nil
	}
	w.wait = nil
}

// answerNow answers a built-in call.
func (a *Agent) answerNow(k *call, out Content) {
	k.finished, k.consumed = true, true
	a.result(k.id, out)
}

// activatingPendingAny reports whether any activating input is queued (a timed wait returns
// on any of it, completions included).
func (c *conversation) activatingPendingAny() bool {
	for _, p := range c.queue {
		if p.activating {
			return true
		}
	}
	return false
}

// runningBackground reports whether the conversation owns a background call still running.
func (c *conversation) runningBackground() bool {
	for _, k := range c.calls {
		if !k.builtin && !k.task && k.background && !k.finished {
			return true
		}
	}
	return false
}

// positiveInteger reports whether raw is a JSON integer ≥ 1 (2.0 and 1e1 are numbers written
// as integers' values but not JSON integers: only digits count).
func positiveInteger(raw json.RawMessage) (int, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s[0] == '-' || s[0] == '"' {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.MaxInt32, true // a huge integer: clamped to the maximum
	}
	if n < 1 {
		return 0, false
	}
	return int(min(n, math.MaxInt32)), true
}

// jsonString returns a JSON string's value, or the JSON text of any other value.
func jsonString(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// CancelWait withdraws a blocked wait without answering it (an MCP client cancelled the
// request: SPEC 14 — only the waiter goes, nothing is consumed).
func (a *Agent) CancelWait(conversationID, callID string) {
	c := a.convs[conversationID]
	if c == nil {
		return
	}
	w := c.calls[callID]
	if w == nil || w.wait == nil && (c.timed == nil || c.timed.k != w) {
		return
	}
	w.unblock()
	if c.timed != nil && c.timed.k == w {
		c.timed.stop()
		c.timed = nil
	}
	w.finished, w.consumed = true, true
}

// Running reports whether the agent's call callID of a conversation is a running host or
// local call (an MCP request for it that is cancelled cancels the call).
func (a *Agent) Running(conversationID, callID string) (brokerID string, ok bool) {
	c := a.convs[conversationID]
	if c == nil {
		return "", false
	}
	k := c.calls[callID]
	if k == nil || k.builtin || k.finished {
		return "", false
	}
	return k.brokerID, true
}

// CallOf returns the agent's id of a job (an MCP client's ids are broker ids already).
func (a *Agent) CallOf(brokerID string) (conversationID, callID string, ok bool) {
	k := a.jobs[brokerID]
	if k == nil {
		return "", "", false
	}
	return k.conv.id, k.id, true
}
