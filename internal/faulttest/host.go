package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// The host's tools and their clocks (SPEC 4: timeouts are the tool's to declare, so jobs run
// out quickly and a run quiesces within seconds).
const (
	quickTimeout    = 2000 * time.Millisecond
	slowTimeout     = 1500 * time.Millisecond
	jobTimeout      = 1500 * time.Millisecond
	deferredTimeout = 3000 * time.Millisecond
)

// hostTools is what every host declares in its hello.
func hostTools() []any {
	obj := map[string]any{"type": "object"}
	return []any{
		map[string]any{"name": "quick", "description": "Answers at once.", "parameters": obj, "timeout": quickTimeout.Milliseconds()},
		map[string]any{"name": "slow", "description": "Answers after a while, or never.", "parameters": obj, "timeout": slowTimeout.Milliseconds()},
		map[string]any{"name": "job", "description": "A background job.", "parameters": obj, "timeout": jobTimeout.Milliseconds(),
			"deferred": true, "deferred_timeout": deferredTimeout.Milliseconds()},
	}
}

// hostActor serves a session's tools. What it does with a call is named by the call's
// arguments (op, ms), which the agent's schedule chose, so a run is a function of its seed.
type hostActor struct {
	s *sessionRun
	l *link

	mu      sync.Mutex
	jobs    map[string]*hjob
	burned  []string // handles of deferred jobs that ended
	slotGen int      // bumped when the host had to attach a fresh slot
	handleN int
	workers workers
}

// workers counts the host's running workers. Unlike a sync.WaitGroup it may gain one while
// somebody waits for none (a tool_call read while the run settles).
type workers struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed when n falls to 0
}

func (w *workers) add() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		w.none = make(chan struct{})
	}
	w.n++
}

func (w *workers) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n--; w.n == 0 {
		close(w.none)
	}
}

// idle is closed once no worker runs.
func (w *workers) idle() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return w.none
}

// hjob is one call the host received.
type hjob struct {
	callID, acid, op, name string
	ms                     int
	slotGen                int
	ctx                    context.Context
	cancel                 context.CancelFunc
	handle                 string
}

func newHost(s *sessionRun) *hostActor {
	h := &hostActor{s: s, jobs: map[string]*hjob{}}
	h.l = newLink(s, "host", s.seed^0x7f4a7c15)
	h.l.helloExtra = func(m map[string]any) { m["tools"] = hostTools() }
	h.l.handle = h.handle
	h.l.fresh = h.freshSlot
	return h
}

// handle takes the host's frames (reader goroutine: nothing here blocks).
func (h *hostActor) handle(f *frame) {
	switch f.Type {
	case "tool_call":
		h.startJob(f.str("call_id"), f.str("name"), f.obj("arguments"))
	case "tool_deferred_resume":
		for _, raw := range f.arr("jobs") {
			var rj struct {
				CallID    string                     `json:"call_id"`
				Name      string                     `json:"name"`
				Handle    string                     `json:"handle"`
				Arguments map[string]json.RawMessage `json:"arguments"`
			}
			if json.Unmarshal(raw, &rj) == nil {
				h.resumeJob(rj.CallID, rj.Name, rj.Handle, rj.Arguments)
			}
		}
	case "tool_cancel":
		h.mu.Lock()
		j := h.jobs[f.str("call_id")]
		if j != nil && j.handle != "" {
			h.burned = append(h.burned, j.handle)
		}
		h.mu.Unlock()
		if j != nil {
			j.cancel()
		}
	}
}

func (h *hostActor) startJob(callID, name string, args map[string]json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.jobs[callID] != nil {
		return
	}
	j := h.newJob(callID, name, args)
	h.workers.add()
	go func() {
		defer h.workers.done()
		h.work(j)
	}()
}

// resumeJob re-attaches a worker to a deferred job the host does not know (a host that lost
// its process would: the harness's workers live on, so this only happens after a lost call).
func (h *hostActor) resumeJob(callID, name, handle string, args map[string]json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.jobs[callID] != nil {
		return
	}
	j := h.newJob(callID, name, args)
	j.handle = handle
	h.workers.add()
	go func() {
		defer h.workers.done()
		h.result(j, true, "ok-"+j.acid+"-resumed", "")
	}()
}

// newJob makes a job record; h.mu is held.
func (h *hostActor) newJob(callID, name string, args map[string]json.RawMessage) *hjob {
	ctx, cancel := context.WithCancel(h.s.run.ctx)
	var ms int
	_ = json.Unmarshal(args["ms"], &ms)
	j := &hjob{callID: callID, name: name, acid: rawStr(args["acid"]), op: rawStr(args["op"]), ms: ms,
		slotGen: h.slotGen, ctx: ctx, cancel: cancel}
	h.jobs[callID] = j
	return j
}

// freshSlot: the host's slot was refused and it attached a new one; the old slot's jobs
// cannot be served from the new slot (forbidden), so their workers stop.
func (h *hostActor) freshSlot() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slotGen++
	for _, j := range h.jobs {
		j.cancel()
	}
}

func (h *hostActor) freshHandle() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handleN++
	return fmt.Sprintf("h-%s-%s-%d", h.s.run.tag, h.s.name, h.handleN)
}

// usable reports whether the job's worker may still act: its slot is the host's.
func (h *hostActor) usable(j *hjob) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return j.slotGen == h.slotGen && !h.l.isLost()
}

// pause sleeps d unless the job is cancelled first; it reports whether the job is live.
func (h *hostActor) pause(j *hjob, d time.Duration) bool {
	select {
	case <-j.ctx.Done():
		return false
	case <-time.After(d):
		return h.usable(j)
	}
}

// pauseAnyway sleeps d even if the job is cancelled (for late results); false when the run
// or the slot is over.
func (h *hostActor) pauseAnyway(j *hjob, d time.Duration) bool {
	select {
	case <-h.s.run.ctx.Done():
		return false
	case <-time.After(d):
		return h.usable(j)
	}
}

// work runs one call by its op.
func (h *hostActor) work(j *hjob) {
	ms := time.Duration(j.ms) * time.Millisecond
	out := func(n int) string { return fmt.Sprintf("ok-%s-%d", j.acid, n) }
	switch j.op {
	case "fast":
		h.result(j, false, out(1), "")
	case "error":
		h.result(j, false, "", "boom-"+j.acid)
	case "double":
		h.result(j, false, out(1), "")
		h.result(j, false, out(2), "") // a double result: call_finished
	case "nodefer":
		h.deferJob(j, h.freshHandle()) // not_deferrable
		h.result(j, false, out(1), "")
	case "slow":
		if h.pause(j, ms) {
			h.result(j, false, out(1), "")
		}
	case "progress":
		for end := time.Now().Add(ms); time.Now().Before(end); {
			if !h.pause(j, 250*time.Millisecond) {
				return
			}
			h.progress(j, false)
		}
		h.result(j, false, out(1), "")
	case "never":
	case "late":
		if h.pauseAnyway(j, slowTimeout+ms) {
			h.result(j, false, out(1), "") // after the ordinary timeout: call_finished
		}
	case "defer", "defer_byid":
		if h.deferJob(j, h.freshHandle()) && h.pause(j, ms/2) {
			h.progress(j, true)
			if h.pause(j, ms/2) {
				h.result(j, j.op == "defer", out(1), "")
			}
		}
	case "defer_error":
		if h.deferJob(j, h.freshHandle()) && h.pause(j, ms) {
			h.result(j, true, "", "boom-"+j.acid)
		}
	case "defer_never":
		h.deferJob(j, h.freshHandle())
	case "defer_reuse":
		h.mu.Lock()
		old := ""
		if len(h.burned) > 0 {
			old = h.burned[j.ms%len(h.burned)]
		}
		h.mu.Unlock()
		if old != "" {
			h.deferJob(j, old) // handle_burned
		}
		if h.deferJob(j, h.freshHandle()) && h.pause(j, ms) {
			h.result(j, true, out(1), "")
		}
	case "defer_repeat":
		hd := h.freshHandle()
		if h.deferJob(j, hd) && h.pause(j, ms/2) {
			h.deferJob(j, hd) // a repeat: accepted again, same deadline
			if h.pause(j, ms/2) {
				h.result(j, true, out(1), "")
			}
		}
	case "defer_hostcancel":
		if h.deferJob(j, h.freshHandle()) && h.pause(j, ms) {
			h.cancelJob(j)
			h.result(j, true, out(1), "") // after the cancel: call_finished
		}
	case "defer_late":
		if h.deferJob(j, h.freshHandle()) && h.pauseAnyway(j, deferredTimeout+ms) {
			h.result(j, true, out(1), "") // after the deferred timeout: call_finished
		}
	case "defer_slow":
		// Defer after the agent got its placeholder (background_after has passed).
		if h.pause(j, ms) && h.deferJob(j, h.freshHandle()) && h.pause(j, ms) {
			h.result(j, true, out(1), "")
		}
	case "defer_reserved":
		h.deferJob(j, "call_abcdefghijklmnopqrst") // handle_reserved: the job stays pending
		if h.pause(j, ms) {
			h.result(j, false, out(1), "")
		}
	default:
		h.result(j, false, out(1), "")
	}
}

// deferJob sends tool_deferred and reports whether it was accepted.
func (h *hostActor) deferJob(j *hjob, handle string) bool {
	for h.usable(j) {
		f, err := h.l.request("defer", func(id string) map[string]any {
			return map[string]any{"type": "tool_deferred", "id": id, "call_id": j.callID, "handle": handle,
				"status_label": "job " + j.acid}
		})
		if err != nil {
			return false
		}
		if f.Type == "tool_deferred_ack" {
			if f.bool("accepted") {
				h.mu.Lock()
				j.handle = handle
				h.mu.Unlock()
				return true
			}
			return false
		}
		if f.Type == "error" && f.str("code") == "internal" && f.bool("retryable") {
			if !h.pause(j, 200*time.Millisecond) {
				return false
			}
			continue
		}
		return false
	}
	return false
}

// ref names the job in a host frame: by handle once deferred (when byHandle), else call_id.
func (h *hostActor) ref(j *hjob, m map[string]any, byHandle bool) {
	h.mu.Lock()
	hd := j.handle
	h.mu.Unlock()
	if byHandle && hd != "" {
		m["handle"] = hd
	} else {
		m["call_id"] = j.callID
	}
}

// result finishes the job (SPEC 5): sent again while its connection dropped before it was
// known applied; a call_finished answer ends the attempt (a late or double result).
func (h *hostActor) result(j *hjob, byHandle bool, output, errText string) {
	for tries := 0; tries < 20 && h.usable(j); tries++ {
		m := map[string]any{"type": "tool_result"}
		h.ref(j, m, byHandle)
		if errText != "" {
			m["error"] = errText
		} else {
			m["output"] = output
		}
		e, err := h.l.silent("res", m)
		switch {
		case err == errNotApplied:
			continue
		case err != nil:
			return
		case e == nil:
			h.mu.Lock()
			if j.handle != "" {
				h.burned = append(h.burned, j.handle)
			}
			h.mu.Unlock()
			return
		case e.str("code") == "internal" && e.bool("retryable"):
			time.Sleep(200 * time.Millisecond)
			continue
		default:
			return
		}
	}
}

// progress sends a tool_progress note (best effort: a silent frame, never repeated).
func (h *hostActor) progress(j *hjob, byHandle bool) {
	m := map[string]any{"type": "tool_progress", "id": h.l.nextID("prog"), "note": "working on " + j.acid}
	h.ref(j, m, byHandle)
	_ = h.l.send(m)
}

// cancelJob sends job.cancel for the job (host_request).
func (h *hostActor) cancelJob(j *hjob) {
	for h.usable(j) {
		f, err := h.l.request("hcancel", func(id string) map[string]any {
			m := map[string]any{"type": "job.cancel", "id": id}
			h.ref(j, m, true)
			return m
		})
		if err != nil {
			return
		}
		if f.Type == "error" && f.str("code") == "internal" && f.bool("retryable") {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		return
	}
}

// idle waits until every worker returned, or the bound passed; it reports whether they did.
func (h *hostActor) idle(bound time.Duration) bool {
	select {
	case <-h.workers.idle():
		return true
	case <-time.After(bound):
		return false
	}
}
