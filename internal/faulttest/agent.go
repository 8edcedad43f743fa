package faulttest

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// agentActor is a session's text agent (SPEC 13): it makes the schedule's calls, waits and
// cancels, and keeps track of which outcomes it still expects.
type agentActor struct {
	s *sessionRun
	l *link

	mu        sync.Mutex
	calls     map[string]*acall
	sendOf    map[string]string // frame id of an agent.tool_call → its call id
	order     []string          // host calls, in the order made
	sendOrder []string          // every call, in the order made
	n         int
}

// acall is one agent call as the agent knows it.
type acall struct {
	id, name, op string
	args         map[string]any
	builtin      bool
	target       string // of a wait or cancel
	known        bool   // the broker answered something about it (it exists there)
	placeholder  bool
	answered     bool // its own non-placeholder agent.tool_result arrived
	consumed     bool // a host call's outcome reached the agent (or the broker says consumed)
	forgotten    bool // the broker answered Unknown tool call id for it
	waiting      int  // exact waits in flight for it
	endPhase     bool // made in the end phase: needs no outcome
	sentAt       time.Time
	sentGen      int // the link's connection generation when it was last sent
}

func newAgent(s *sessionRun) *agentActor {
	a := &agentActor{s: s, calls: map[string]*acall{}, sendOf: map[string]string{}}
	a.l = newLink(s, "agent", s.seed^0x2545f491)
	a.l.handle = a.handle
	a.l.ready = a.ready
	return a
}

// handle takes the agent's frames (reader goroutine).
func (a *agentActor) handle(f *frame) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch f.Type {
	case "agent.tool_result":
		k := a.calls[f.str("call_id")]
		if k == nil {
			return
		}
		k.known, k.forgotten = true, false
		if f.str("kind") == "background_placeholder" {
			k.placeholder = true
			return
		}
		k.answered = true
		if !k.builtin {
			k.consumed = true
			return
		}
		if k.name == "wait" {
			a.waitAnswered(k, parseContent(f.str("content")))
		}
		if k.name == "cancel" {
			if t := a.calls[k.target]; t != nil && parseContent(f.str("content")).headers["error"] == msgUnknownID {
				t.forgotten = true
			}
		}
	case "error":
		if id := a.sendOf[f.str("ref")]; id != "" {
			if k := a.calls[id]; k != nil {
				k.known = true // refused as a duplicate id: the first send exists
			}
		}
	}
}

// waitAnswered books a wait's answer; a.mu is held.
func (a *agentActor) waitAnswered(w *acall, c content) {
	t := a.calls[w.target]
	if t != nil && w.target != "" {
		t.waiting--
	}
	if c.headers["wait_outcome"] == "interrupted" {
		return
	}
	if e, ok := c.headers["error"]; ok && waitErrors[e] {
		if t == nil {
			return
		}
		switch e {
		case msgAlreadyConsumed:
			t.consumed = true
		case msgUnknownID:
			t.forgotten = true
		}
		return
	}
	id := w.target
	if id == "" {
		id = c.headers["original_tool_call_id"]
	}
	if t := a.calls[id]; t != nil {
		t.consumed = true
	}
}

// ready runs after every (re)connection's barrier: calls of an older connection that got no
// answer at all are sent again with the same call_id — a duplicate id is refused (bad_frame)
// when the first got through, and runs when it did not.
func (a *agentActor) ready(resumed bool, send func(map[string]any)) {
	if !resumed {
		return
	}
	a.mu.Lock()
	var again []*acall
	for _, id := range a.sendOrder {
		if k := a.calls[id]; !k.known {
			again = append(again, k)
		}
	}
	a.mu.Unlock()
	for _, k := range again {
		a.sendCallWith(k, send)
	}
}

// call makes an agent call.
func (a *agentActor) call(name string, args map[string]any) *acall {
	a.mu.Lock()
	a.n++
	prefix := "c"
	switch name {
	case "wait":
		prefix = "w"
	case "cancel":
		prefix = "x"
	case "status":
		prefix = "st"
	}
	id := fmt.Sprintf("%s%d", prefix, a.n)
	k := &acall{id: id, name: name, args: args, builtin: name == "wait" || name == "cancel" || name == "status"}
	if args == nil {
		k.args = map[string]any{}
	}
	if !k.builtin {
		k.args["acid"] = id
		k.op, _ = k.args["op"].(string)
		a.order = append(a.order, id)
	}
	if t, ok := k.args["tool_call_id"].(string); ok {
		k.target = t
		if t := a.calls[t]; t != nil && name == "wait" {
			t.waiting++
		}
	}
	a.calls[id] = k
	a.sendOrder = append(a.sendOrder, id)
	a.mu.Unlock()
	a.sendCall(k)
	return k
}

func (a *agentActor) sendCall(k *acall) {
	a.sendCallWith(k, func(f map[string]any) { _ = a.l.send(f) })
}

// sendCallWith sends agent.tool_call for k with send.
func (a *agentActor) sendCallWith(k *acall, send func(map[string]any)) {
	id := a.l.nextID("tc")
	a.l.mu.Lock()
	gen := a.l.gen
	a.l.mu.Unlock()
	a.mu.Lock()
	a.sendOf[id] = k.id
	k.sentAt, k.sentGen = time.Now(), gen
	a.mu.Unlock()
	send(map[string]any{"type": "agent.tool_call", "id": id, "call_id": k.id, "conversation_id": "root",
		"name": k.name, "arguments": k.args})
}

// callBound is how long a call may go without any answer (its result or its placeholder,
// due after background_after) on the connection it was sent on.
const callBound = 10 * time.Second

// checkStalls drops the connection when a call sent on it got no answer at all within
// callBound (the call or its answer was lost: the resume sends it again).
func (a *agentActor) checkStalls() {
	a.l.mu.Lock()
	gen, conn := a.l.gen, a.l.conn
	a.l.mu.Unlock()
	if conn == nil {
		return
	}
	a.mu.Lock()
	var stalled *acall
	for _, id := range sortedKeys(a.calls) {
		k := a.calls[id]
		// A wait may block as long as what it waits for runs; everything else is answered at
		// once or gets its placeholder after background_after.
		if k.name != "wait" && !k.known && !k.answered && k.sentGen == gen && !k.sentAt.IsZero() && time.Since(k.sentAt) > callBound {
			stalled = k
			break
		}
	}
	if stalled != nil {
		stalled.sentAt = time.Now() // once per connection
	}
	a.mu.Unlock()
	if stalled != nil {
		a.s.rec.note(conn.idx, HarnessNote{Note: NoteStalled, Role: "agent",
			Text: fmt.Sprintf("call %s got no answer for %v on an open connection", stalled.id, callBound)})
		a.l.drop()
	}
}

// pick returns a random host call for which pred holds ("" when none).
func (a *agentActor) pick(r interface{ IntN(int) int }, pred func(*acall) bool) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for _, id := range a.order {
		if pred(a.calls[id]) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[r.IntN(len(ids))]
}

// unresolved lists the calls whose outcome the agent still waits for, and sends an exact
// wait for each background call nobody waits for.
func (a *agentActor) unresolved() []string {
	a.mu.Lock()
	var todo []string
	var waitFor []string
	onlyBare := true
	for _, id := range sortedKeys(a.calls) {
		k := a.calls[id]
		if k.endPhase {
			continue
		}
		if k.builtin {
			if !k.answered {
				todo = append(todo, id)
				if k.name != "wait" || k.target != "" {
					onlyBare = false
				}
			}
			continue
		}
		if k.consumed || k.forgotten {
			continue
		}
		todo = append(todo, id)
		onlyBare = false
		if k.placeholder && k.waiting == 0 {
			waitFor = append(waitFor, id)
		}
	}
	// Bare waits alone would block forever when every completion went to an exact wait
	// (SPEC 13 lets a bare wait block while nothing runs): one more background call frees them.
	release := len(todo) > 0 && onlyBare
	a.mu.Unlock()
	if release {
		a.call("slow", map[string]any{"op": "slow", "ms": 450})
	}
	for _, id := range waitFor {
		a.call("wait", map[string]any{"tool_call_id": id})
	}
	sort.Strings(todo)
	return todo
}

// quiesce waits (bounded) until every call made has its outcome, waiting for the background
// ones; it returns what is still unresolved.
func (a *agentActor) quiesce(bound time.Duration) []string {
	deadline := time.Now().Add(bound)
	var todo []string
	for time.Now().Before(deadline) {
		if a.l.isLost() {
			return nil
		}
		a.checkStalls()
		todo = a.unresolved()
		if len(todo) == 0 {
			return nil
		}
		time.Sleep(150 * time.Millisecond)
	}
	return todo
}
