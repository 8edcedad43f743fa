package faulttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Violation is one departure from docs/spec.md found in the histories of a run.
type Violation struct {
	Kind    string // one of the Kind* constants
	Run     string
	Seed    uint64
	Session string
	Msg     string
	Events  []int  // the events at fault (indices into the session's History.Events)
	Trace   string // the seed, the session and the frames around the violation
}

func (v Violation) String() string { return v.Trace }

// The kinds of Violation.
const (
	// KindSeqGap: a connection's seqs are not consecutive (a frame missing, or out of order),
	// or a replay does not start at last_seq+1 (SPEC 2, 10).
	KindSeqGap = "seq-gap"
	// KindSeqRepeat: one connection received the same seq twice.
	KindSeqRepeat = "seq-repeat"
	// KindReplayDiffers: a seq seen before on the slot came again with other bytes.
	KindReplayDiffers = "replay-differs"
	// KindNoSeq: a frame after welcome without seq (SPEC 2).
	KindNoSeq = "frame-without-seq"
	// KindHelloRefused: a hello refused where the spec allows no refusal (a valid resume token
	// of a live session answered resume_invalid, not_found, resume_expired, ...).
	KindHelloRefused = "hello-refused"
	// KindHelloUnanswered: a hello on a connection that stayed open got no answer.
	KindHelloUnanswered = "hello-unanswered"
	// KindGaveUp: a client could not get back into its session within the harness's bound.
	KindGaveUp = "reconnect-gave-up"
	// KindStalled: a request went unanswered for long on a connection the broker kept open
	// (a frame or its answer was lost on the way).
	KindStalled = "connection-stalled"
	// KindAfterEnded: a frame after session.ended on a connection (SPEC 3.6).
	KindAfterEnded = "frame-after-session-ended"
	// KindUnexpectedEnd: session.ended though nobody sent session.end.
	KindUnexpectedEnd = "session-ended-unasked"
	// KindToolCallTwice: one broker call_id delivered to the host under two seqs.
	KindToolCallTwice = "tool-call-delivered-twice"
	// KindDispatchedTwice: one agent call became two jobs at the host.
	KindDispatchedTwice = "agent-call-dispatched-twice"
	// KindSecondCancel: a job got more than one tool_cancel (SPEC 11: sent once per job).
	KindSecondCancel = "second-tool-cancel"
	// KindBurnedHandle: tool_deferred_ack accepted a handle already accepted for another call.
	KindBurnedHandle = "burned-handle-accepted"
	// KindDeferAfterEnd: a defer accepted after the job's tool_cancel.
	KindDeferAfterEnd = "defer-accepted-after-end"
	// KindRepeatDeadline: a repeated defer accepted with another deadline_ms (SPEC 6 row 3).
	KindRepeatDeadline = "defer-repeat-deadline-changed"
	// KindRequestLost: a request the broker applied (a later request on the same connection
	// was answered) never got its answer.
	KindRequestLost = "request-unanswered"
	// KindResultTwice: an agent call's outcome (or a placeholder, or a built-in's answer)
	// delivered more than once.
	KindResultTwice = "result-delivered-twice"
	// KindNoOutcome: an agent call the broker accepted never reached the agent's outcome
	// (a result, or a background result consumed by a wait; a wait or cancel never answered).
	KindNoOutcome = "call-without-outcome"
	// KindOutcomeMismatch: the agent's outcome of a call disagrees with what the host saw
	// (tool_cancel reason, the results it sent): two terminal states.
	KindOutcomeMismatch = "outcome-disagrees-with-host"
	// KindCancelLost: a job ended cancelled or timed out without its tool_cancel at the host.
	KindCancelLost = "job-ended-without-tool-cancel"
	// KindUnknownAccepted: `Unknown tool call id` for a call the broker had accepted.
	KindUnknownAccepted = "unknown-id-for-accepted-call"
	// KindPhantomConsumed: `already consumed` for a result the agent never received.
	KindPhantomConsumed = "consumed-but-never-delivered"
	// KindWaitAnswer: a wait answer the state of the calls does not allow.
	KindWaitAnswer = "wrong-wait-answer"
	// KindCancelAnswer: a cancel answer the state of the call does not allow, or a cancel
	// applied (its tool_cancel reason says so) whose answer never came.
	KindCancelAnswer = "wrong-cancel-answer"
	// KindCancelledTwice: two cancel requests of one job both answered as the cancelling one.
	KindCancelledTwice = "job-cancelled-twice"
	// KindPrompt: a completion prompt that should not exist (twice, for a foreground call,
	// after the result was consumed).
	KindPrompt = "wrong-completion-prompt"
	// KindErrorFrame: an error the spec does not allow in the situation (unknown_call for a
	// known job, call_finished for an open job, forbidden from the job's own slot, bad_frame).
	KindErrorFrame = "unexpected-error"
	// KindResumeList: tool_deferred_resume lists a job that had already ended.
	KindResumeList = "resume-lists-finished-job"
	// KindNotDiscarded: a job still open when its session ended got no tool_cancel.
	KindNotDiscarded = "job-not-discarded-at-end"
	// KindDeadlineMissed: a job was still open (no tool_cancel, no result) well after its
	// ordinary timeout (timeout_ms after its last activity) or its deferred deadline_ms, though
	// its host had seen everything the broker sent until then (SPEC 5: no job outlives its
	// timeout).
	KindDeadlineMissed = "job-outlived-its-deadline"
	// KindDeferLost: an accepted defer did not stay accepted: the job timed out on its
	// ordinary clock before its deadline_ms, or tool_deferred_resume left out a deferred job
	// that was still live (it completed later with a result sent after the resume).
	KindDeferLost = "acknowledged-defer-lost"
	// KindStartFailedDispatched: the agent was told a call could not be started, yet the host
	// got its tool_call.
	KindStartFailedDispatched = "not-started-but-dispatched"
)

// Check checks the histories of one or more runs (a pure function: histories in,
// violations out). Handles are per tenant, and every run uses one tenant on its own store, so
// histories are grouped by Run for the handle rules.
func Check(hs []History) []Violation {
	var out []Violation
	claims := map[string]map[string]*handleClaim{} // run → handle → first acceptance
	for i := range hs {
		h := &hs[i]
		if claims[h.Run] == nil {
			claims[h.Run] = map[string]*handleClaim{}
		}
		sc := &sessionCheck{h: h, claims: claims[h.Run]}
		sc.run()
		out = append(out, sc.out...)
	}
	return out
}

// handleClaim is the first accepted defer of a handle.
type handleClaim struct {
	session  string
	callID   string
	deadline int64
}

// connView is one connection as the checker sees it.
type connView struct {
	idx      int
	role     string
	helloEv  int // -1 when the connection never sent a hello
	hello    *frame
	answerEv int    // welcome or the refusing error, -1 when none
	welcome  *frame // nil when refused or unanswered
	refusal  *frame
	closedEv int
	endedEv  int   // session.ended received, -1 when not
	sends    []int // Sent events after the hello
	slot     int   // -1 without a welcome
}

// slotFrame is one distinct frame of a slot, by seq, with the event where it was first seen.
type slotFrame struct {
	seq int64
	ev  int
	f   *frame
}

// slotView is one slot: the chain of connections that resumed one another.
type slotView struct {
	id     int
	role   string
	conns  []int
	seen   map[int64]int // seq → first event
	stream []slotFrame   // distinct frames in seq order (built after the seq pass)
	byRef  map[string][]slotFrame
	lost   bool // a resume of it was refused (or the harness gave it up): it was not followed further
	maxSeq int64
}

type sessionCheck struct {
	h      *History
	claims map[string]*handleClaim
	out    []Violation

	frames []*frame // parsed Raw of Sent/Recv events (nil for others)
	conns  []*connView
	slots  []*slotView
	sentID map[string]int // frame id → Sent event
	ended  bool           // some connection received session.ended
	endSent,
	endPhase int // first Sent session.end / end-phase note, -1 when none

	// host side
	jobs      map[string]*hostJob // broker call_id → job
	byAcid    map[string][]string // agent call id → broker call_ids
	handleJob map[string]string   // accepted handle → call_id (this session)
	// agent side
	calls map[string]*agentCall
}

type hostJob struct {
	callID, acid, name string
	slot               int
	ev                 int
	seq                int64
	cancels            []slotFrame // tool_cancel frames (distinct seqs)
	hostCancelled      []int       // job.cancel_result "cancelled" events
	outputs            []string    // outputs the host sent (compact JSON strings' values)
	errors             []string    // errors the host sent
	resultSent         bool
	finishedErrs       []int // call_finished answers to its frames
	timeoutMS          int64 // of its tool_call
	deadlineMS         int64 // of its first accepted defer, 0 when none
	ackSeq             int64 // the seq of that ack in its slot
	resultsAfter       []resultSend
	lastActivity       time.Time // its tool_call, or the last tool_progress the host sent for it
}

// resultSend is one tool_result a host sent.
type resultSend struct {
	ev     int
	output string
	isErr  bool
}

type agentCall struct {
	id        string
	name      string
	builtin   bool
	args      map[string]json.RawMessage
	sends     []int // Sent events of agent.tool_call with this call_id
	slot      int
	results   []slotFrame // agent.tool_result frames
	refusedAt []int       // sends answered `already used` (bad_frame)
	consumed  []consumption
	prompts   []slotFrame
	requested []slotFrame // agent cancels of it answered "Tool cancellation requested"
}

type consumption struct {
	by  string // the wait
	seq int64
	ev  int
	c   content
}

func (sc *sessionCheck) violate(kind string, evs []int, format string, args ...any) {
	v := Violation{Kind: kind, Run: sc.h.Run, Seed: sc.h.Seed, Session: sc.h.Session,
		Msg: fmt.Sprintf(format, args...), Events: evs}
	v.Trace = sc.trace(v)
	sc.out = append(sc.out, v)
}

func (sc *sessionCheck) run() {
	h := sc.h
	sc.frames = make([]*frame, len(h.Events))
	sc.sentID = map[string]int{}
	sc.endSent, sc.endPhase = -1, -1
	for i, e := range h.Events {
		switch e.Dir {
		case Sent, Recv:
			sc.frames[i] = parseFrame(e.Raw)
			if e.Dir == Sent {
				if id := sc.frames[i].str("id"); id != "" {
					if _, dup := sc.sentID[id]; !dup {
						sc.sentID[id] = i
					}
				}
				if sc.frames[i].Type == "session.end" && sc.endSent < 0 {
					sc.endSent = i
				}
			}
		case Note:
			var n HarnessNote
			_ = json.Unmarshal(e.Raw, &n)
			switch n.Note {
			case NoteEndPhase:
				if sc.endPhase < 0 {
					sc.endPhase = i
				}
			case NoteGaveUp:
				sc.violate(KindGaveUp, []int{i}, "the %s client gave up reconnecting: %s", n.Role, n.Text)
			case NoteStalled:
				sc.violate(KindStalled, []int{i}, "the %s client's %s", n.Role, n.Text)
			}
		}
	}
	sc.buildConns()
	sc.buildSlots()
	sc.checkSeqs()
	sc.buildStreams()
	sc.checkHellos()
	sc.hostPass()
	sc.agentPass()
	sc.crossCheck()
	sc.deadlinePass()
	sc.deferPass()
	sc.requestsPass()
	sc.endPass()
}

func (sc *sessionCheck) buildConns() {
	h := sc.h
	sc.conns = make([]*connView, len(h.Conns))
	for i, ci := range h.Conns {
		sc.conns[i] = &connView{idx: i, role: ci.Role, helloEv: -1, answerEv: -1, closedEv: -1, endedEv: -1, slot: -1}
	}
	for i, e := range h.Events {
		if e.Conn < 0 || e.Conn >= len(sc.conns) {
			continue
		}
		c := sc.conns[e.Conn]
		f := sc.frames[i]
		switch e.Dir {
		case Sent:
			if c.helloEv < 0 && f.Type == "hello" {
				c.helloEv, c.hello = i, f
				if r := f.str("role"); r != "" {
					c.role = r
				}
				continue
			}
			c.sends = append(c.sends, i)
		case Recv:
			if c.answerEv < 0 {
				c.answerEv = i
				if f.Type == "welcome" {
					c.welcome = f
				} else if f.Type == "error" && f.seq() < 0 {
					c.refusal = f
				} else {
					c.answerEv = -1 // not an answer to the hello: checked by the seq pass
				}
				if c.answerEv >= 0 {
					continue
				}
			}
			if f.Type == "session.ended" && c.endedEv < 0 {
				c.endedEv = i
				sc.ended = true
			}
		case Closed:
			if c.closedEv < 0 {
				c.closedEv = i
			}
		}
	}
}

// buildSlots chains connections into slots: a fresh hello opens a slot, a resume joins the
// slot whose welcome gave its token.
func (sc *sessionCheck) buildSlots() {
	order := make([]*connView, 0, len(sc.conns))
	for _, c := range sc.conns {
		if c.helloEv >= 0 {
			order = append(order, c)
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].helloEv < order[j].helloEv })
	tokenSlot := map[string]int{}
	for _, c := range order {
		tok := c.hello.str("resume_token")
		slot := -1
		if tok != "" {
			if s, ok := tokenSlot[tok]; ok {
				slot = s
			}
		}
		if c.welcome == nil {
			if c.refusal != nil && slot >= 0 {
				code := c.refusal.str("code")
				if code != "internal" || !c.refusal.bool("retryable") {
					sc.slots[slot].lost = true
				}
			}
			continue
		}
		if slot < 0 {
			slot = len(sc.slots)
			sc.slots = append(sc.slots, &slotView{id: slot, role: c.role, seen: map[int64]int{}, byRef: map[string][]slotFrame{}})
		}
		c.slot = slot
		sc.slots[slot].lost = false // back in after a refusal
		sc.slots[slot].conns = append(sc.slots[slot].conns, c.idx)
		if nt := c.welcome.str("resume_token"); nt != "" {
			tokenSlot[nt] = slot
		}
	}
	for i, e := range sc.h.Events {
		if e.Dir != Note || e.Conn < 0 || e.Conn >= len(sc.conns) {
			continue
		}
		var n HarnessNote
		_ = json.Unmarshal(e.Raw, &n)
		if n.Note == NoteSlotLost || n.Note == NoteGaveUp {
			if s := sc.slotOfConnOrPrev(e.Conn, i); s >= 0 {
				sc.slots[s].lost = true
			}
		}
	}
}

// slotOfConnOrPrev is the slot a note about connection conn concerns: its own, or — for a
// connection that never got a welcome — the slot its resume token names.
func (sc *sessionCheck) slotOfConnOrPrev(conn, _ int) int {
	c := sc.conns[conn]
	if c.slot >= 0 {
		return c.slot
	}
	if c.hello == nil {
		return -1
	}
	tok := c.hello.str("resume_token")
	for _, o := range sc.conns {
		if o.welcome != nil && o.welcome.str("resume_token") == tok && tok != "" {
			return o.slot
		}
	}
	return -1
}

// checkSeqs checks every connection's seqs (consecutive from 1, or from last_seq+1 after a
// resume) and that a seq seen again on the slot has the same bytes.
func (sc *sessionCheck) checkSeqs() {
	for _, c := range sc.conns {
		if c.welcome == nil {
			// Frames without a welcome: anything after a refusal is a violation of its own.
			continue
		}
		sl := sc.slots[c.slot]
		next := int64(1)
		if c.hello.str("resume_token") != "" {
			ls, _ := c.hello.int("last_seq")
			next = ls + 1
		}
		here := map[int64]bool{}
		for i := c.answerEv + 1; i < len(sc.h.Events); i++ {
			e := sc.h.Events[i]
			if e.Conn != c.idx || e.Dir != Recv {
				continue
			}
			f := sc.frames[i]
			if c.endedEv >= 0 && i > c.endedEv {
				sc.violate(KindAfterEnded, []int{c.endedEv, i}, "connection c%d received %s after session.ended", c.idx, f.Type)
			}
			seq := f.seq()
			if seq < 0 {
				sc.violate(KindNoSeq, []int{i}, "connection c%d received %s without seq", c.idx, describe(f))
				continue
			}
			switch {
			case here[seq]:
				sc.violate(KindSeqRepeat, []int{i}, "connection c%d received seq %d a second time", c.idx, seq)
			case seq != next:
				if seq > next {
					sc.violate(KindSeqGap, []int{i}, "connection c%d (slot %d) expected seq %d, got %d: %d frame(s) missing", c.idx, c.slot, next, seq, seq-next)
				} else {
					sc.violate(KindSeqGap, []int{i}, "connection c%d (slot %d) expected seq %d, got %d: seq went back", c.idx, c.slot, next, seq)
				}
			}
			here[seq] = true
			if seq >= next {
				next = seq + 1
			}
			if first, ok := sl.seen[seq]; ok {
				if !bytes.Equal(sc.h.Events[first].Raw, e.Raw) {
					sc.violate(KindReplayDiffers, []int{first, i}, "slot %d seq %d was %s and is now %s", c.slot, seq, describe(sc.frames[first]), describe(f))
				}
			} else {
				sl.seen[seq] = i
			}
			sl.maxSeq = max(sl.maxSeq, seq)
		}
	}
}

func (sc *sessionCheck) buildStreams() {
	for _, sl := range sc.slots {
		for seq, ev := range sl.seen {
			sl.stream = append(sl.stream, slotFrame{seq: seq, ev: ev, f: sc.frames[ev]})
		}
		sort.Slice(sl.stream, func(i, j int) bool { return sl.stream[i].seq < sl.stream[j].seq })
		for _, sf := range sl.stream {
			if r := sf.f.str("ref"); r != "" {
				sl.byRef[r] = append(sl.byRef[r], sf)
			}
		}
	}
}

// checkHellos checks that every hello got the answer the spec gives it.
func (sc *sessionCheck) checkHellos() {
	// Tokens sent in a hello whose connection never got a welcome may have been used (the
	// broker may have rotated them and its welcome been lost with the connection).
	// A connection the broker closed in order (a close frame) without answering the hello
	// had no reason to lose the welcome, so a token it consumed silently is the broker's loss.
	possiblyUsed := map[string]int{} // token → first such hello on a dropped connection
	silentlyUsed := map[string]int{} // token → first such hello on a connection closed in order
	for i, e := range sc.h.Events {
		if e.Dir != Sent || e.Conn < 0 {
			continue
		}
		c := sc.conns[e.Conn]
		if c.helloEv != i {
			continue
		}
		tok := c.hello.str("resume_token")
		if c.welcome != nil || c.refusal != nil || tok == "" {
			continue
		}
		m := possiblyUsed
		if c.closedEv >= 0 {
			var n CloseNote
			_ = json.Unmarshal(sc.h.Events[c.closedEv].Raw, &n)
			if n.By == "server" && n.Code != 0 {
				m = silentlyUsed
			}
		}
		if _, ok := m[tok]; !ok {
			m[tok] = i
		}
	}
	for _, c := range sc.conns {
		if c.helloEv < 0 {
			continue
		}
		if c.welcome == nil && c.refusal == nil {
			if c.closedEv < 0 {
				sc.violate(KindHelloUnanswered, []int{c.helloEv}, "the hello of c%d (%s) was never answered", c.idx, c.role)
			}
			continue
		}
		if c.refusal == nil {
			continue
		}
		code := c.refusal.str("code")
		tok := c.hello.str("resume_token")
		switch {
		case code == "internal" && c.refusal.bool("retryable"):
			continue
		case code == "resume_invalid" && tok != "":
			if first, ok := possiblyUsed[tok]; ok && first < c.helloEv {
				continue
			}
			if strings.Contains(c.refusal.str("message"), "frames lost") {
				if s := sc.slotOfConnOrPrev(c.idx, c.helloEv); s >= 0 {
					ls, _ := c.hello.int("last_seq")
					if sc.slots[s].maxSeq-ls >= 1000 {
						continue
					}
				}
			}
		case code == "session_ended":
			if sc.endSent >= 0 && sc.endSent < c.answerEv {
				continue
			}
		}
		kind := "a fresh attach"
		evs := []int{c.helloEv, c.answerEv}
		if tok != "" {
			ls, _ := c.hello.int("last_seq")
			kind = fmt.Sprintf("a resume (last_seq %d) with the slot's current token", ls)
			if first, ok := silentlyUsed[tok]; ok && first < c.helloEv && code == "resume_invalid" {
				fc := sc.conns[sc.h.Events[first].Conn]
				kind = fmt.Sprintf("a resume (last_seq %d) whose token an earlier hello (c%d) had consumed without its welcome ever arriving — the broker closed that connection in order (%s)",
					ls, fc.idx, sc.h.Events[fc.closedEv].Raw)
				evs = []int{first, fc.closedEv, c.helloEv, c.answerEv}
			}
		}
		sc.violate(KindHelloRefused, evs, "%s of the live session was refused with %s: %s", kind, code, c.refusal.str("message"))
	}
}

// hostPass reads the host slots' frames: jobs, cancels, acks, errors.
func (sc *sessionCheck) hostPass() {
	sc.jobs, sc.byAcid, sc.handleJob = map[string]*hostJob{}, map[string][]string{}, map[string]string{}
	for _, sl := range sc.slots {
		if sl.role != "host" {
			continue
		}
		for _, sf := range sl.stream {
			if sf.f.Type != "tool_call" {
				continue
			}
			id := sf.f.str("call_id")
			args := sf.f.obj("arguments")
			acid := rawStr(args["acid"])
			if j := sc.jobs[id]; j != nil {
				sc.violate(KindToolCallTwice, []int{j.ev, sf.ev}, "the host got tool_call %s twice (slot %d seq %d, slot %d seq %d)", id, j.slot, j.seq, sl.id, sf.seq)
				continue
			}
			timeout, _ := sf.f.int("timeout_ms")
			sc.jobs[id] = &hostJob{callID: id, acid: acid, name: sf.f.str("name"), slot: sl.id, ev: sf.ev, seq: sf.seq,
				timeoutMS: timeout, lastActivity: sc.h.Events[sf.ev].At}
			if acid != "" {
				if prev := sc.byAcid[acid]; len(prev) > 0 {
					sc.violate(KindDispatchedTwice, []int{sc.jobs[prev[0]].ev, sf.ev}, "agent call %s became two jobs at the host: %s and %s", acid, prev[0], id)
				}
				sc.byAcid[acid] = append(sc.byAcid[acid], id)
			}
		}
	}
	// Accepted handles of this session (needed before the errors are judged).
	for _, sl := range sc.slots {
		if sl.role != "host" {
			continue
		}
		for _, sf := range sl.stream {
			if sf.f.Type == "tool_deferred_ack" && sf.f.bool("accepted") {
				if _, ok := sc.handleJob[sf.f.str("handle")]; !ok {
					sc.handleJob[sf.f.str("handle")] = sf.f.str("call_id")
				}
			}
		}
	}
	for _, sl := range sc.slots {
		if sl.role != "host" {
			continue
		}
		cancelled := map[string]int64{} // call_id → seq of its first tool_cancel in this slot
		for _, sf := range sl.stream {
			f := sf.f
			switch f.Type {
			case "tool_cancel":
				id := f.str("call_id")
				j := sc.jobOf(id)
				if len(j.cancels) > 0 {
					first := j.cancels[0]
					sc.violate(KindSecondCancel, []int{first.ev, sf.ev}, "job %s got a second tool_cancel (seq %d reason %s, then seq %d reason %s)",
						id, first.seq, first.f.str("reason"), sf.seq, f.str("reason"))
				}
				j.cancels = append(j.cancels, sf)
				if _, ok := cancelled[id]; !ok {
					cancelled[id] = sf.seq
				}
			case "tool_deferred_ack":
				if !f.bool("accepted") {
					continue
				}
				id, handle := f.str("call_id"), f.str("handle")
				if req, ok := sc.request(f.str("ref")); ok && (req.str("call_id") != id || req.str("handle") != handle) {
					sc.violate(KindErrorFrame, []int{sc.sentID[f.str("ref")], sf.ev}, "the ack names call %s handle %q, the defer named call %s handle %q", id, handle, req.str("call_id"), req.str("handle"))
				}
				if at, ok := cancelled[id]; ok && at < sf.seq {
					sc.violate(KindDeferAfterEnd, []int{sf.ev}, "defer of %s under %q accepted after its tool_cancel (seq %d)", id, handle, at)
				}
				deadline, _ := f.int("deadline_ms")
				if j := sc.jobOf(id); j.deadlineMS == 0 {
					j.deadlineMS, j.ackSeq = deadline, sf.seq
				}
				if cl := sc.claims[handle]; cl != nil {
					if cl.callID != id {
						sc.violate(KindBurnedHandle, []int{sf.ev}, "handle %q accepted for %s, but it was accepted before for %s (session %s)", handle, id, cl.callID, cl.session)
					} else if cl.deadline != deadline {
						sc.violate(KindRepeatDeadline, []int{sf.ev}, "repeated defer of %s under %q accepted with deadline_ms %d, first %d", id, handle, deadline, cl.deadline)
					}
				} else {
					sc.claims[handle] = &handleClaim{session: sc.h.Session, callID: id, deadline: deadline}
				}
			case "job.cancel_result":
				req, ok := sc.request(f.str("ref"))
				if !ok {
					continue
				}
				target := req.str("call_id")
				switch f.str("result") {
				case "cancelled":
					id := f.str("call_id")
					sc.jobOf(id).hostCancelled = append(sc.jobOf(id).hostCancelled, sf.ev)
				case "unknown_call":
					if target != barrierCallID && sc.knownJob(target, req.str("handle")) {
						sc.violate(KindErrorFrame, []int{sc.sentID[f.str("ref")], sf.ev}, "job.cancel of a known job (%s%s) answered unknown_call", target, req.str("handle"))
					}
				}
			case "error":
				sc.hostError(sl, sf)
			case "tool_deferred_resume":
				for _, raw := range f.arr("jobs") {
					var rj struct {
						CallID string `json:"call_id"`
					}
					_ = json.Unmarshal(raw, &rj)
					if at, ok := cancelled[rj.CallID]; ok && at < sf.seq {
						sc.violate(KindResumeList, []int{sf.ev}, "tool_deferred_resume lists %s, whose tool_cancel came at seq %d", rj.CallID, at)
					}
				}
			}
		}
	}
	// What the host sent: results by call_id or handle.
	for i, e := range sc.h.Events {
		if e.Dir != Sent || e.Conn < 0 || sc.conns[e.Conn].role != "host" {
			continue
		}
		f := sc.frames[i]
		if f.Type == "tool_progress" || f.Type == "tool_partial_result" {
			id := f.str("call_id")
			if id == "" {
				id = sc.handleJob[f.str("handle")]
			}
			if j := sc.jobs[id]; j != nil && e.At.After(j.lastActivity) {
				j.lastActivity = e.At
			}
			continue
		}
		if f.Type != "tool_result" {
			continue
		}
		id := f.str("call_id")
		if id == "" {
			id = sc.handleJob[f.str("handle")]
		}
		if id == "" {
			continue
		}
		j := sc.jobOf(id)
		j.resultSent = true
		if f.has("error") {
			j.errors = append(j.errors, f.str("error"))
			j.resultsAfter = append(j.resultsAfter, resultSend{ev: i, output: f.str("error"), isErr: true})
		} else {
			j.outputs = append(j.outputs, outputText(f.m["output"]))
			j.resultsAfter = append(j.resultsAfter, resultSend{ev: i, output: outputText(f.m["output"])})
		}
	}
}

// outputText is how a text agent's result body shows an output (SPEC 13: a string as it is,
// any other JSON value compact).
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// jobOf returns the host job of a call id, creating an empty one for a call the host never
// saw (its tool_call was replaced in the outbox by its tool_cancel).
func (sc *sessionCheck) jobOf(id string) *hostJob {
	j := sc.jobs[id]
	if j == nil {
		j = &hostJob{callID: id, slot: -1, ev: -1}
		sc.jobs[id] = j
	}
	return j
}

func (sc *sessionCheck) knownJob(callID, handle string) bool {
	if callID != "" {
		j := sc.jobs[callID]
		return j != nil && j.ev >= 0
	}
	_, ok := sc.handleJob[handle]
	return ok
}

func (sc *sessionCheck) request(id string) (*frame, bool) {
	if id == "" {
		return nil, false
	}
	i, ok := sc.sentID[id]
	if !ok {
		return nil, false
	}
	return sc.frames[i], true
}

// hostError judges an error frame the host received.
func (sc *sessionCheck) hostError(sl *slotView, sf slotFrame) {
	f := sf.f
	code := f.str("code")
	ref := f.str("ref")
	req, ok := sc.request(ref)
	evs := []int{sf.ev}
	if ok {
		evs = []int{sc.sentID[ref], sf.ev}
	}
	switch code {
	case "internal":
		if f.bool("retryable") {
			return
		}
	case "call_finished":
		id := f.str("call_id")
		if id == "" && ok {
			id = req.str("call_id")
		}
		if id != "" {
			j := sc.jobOf(id)
			j.finishedErrs = append(j.finishedErrs, sf.ev)
		}
		return
	case "call_not_pending":
		return
	case "unknown_call":
		if ok && !sc.knownJob(req.str("call_id"), req.str("handle")) {
			return
		}
	case "forbidden":
		id := f.str("call_id")
		if id == "" && ok {
			id = req.str("call_id")
		}
		if j := sc.jobs[id]; j == nil || j.slot != sl.id {
			return // the job is another slot's (the host re-attached after losing its slot)
		}
	}
	what := "a frame"
	if ok {
		what = describe(req)
	}
	sc.violate(KindErrorFrame, evs, "the host got error %s (%s) for %s", code, f.str("message"), what)
}

// agentPass reads the agent slots: its calls, their results, waits, cancels and prompts.
func (sc *sessionCheck) agentPass() {
	sc.calls = map[string]*agentCall{}
	for i, e := range sc.h.Events {
		if e.Dir != Sent || e.Conn < 0 || sc.conns[e.Conn].role != "agent" {
			continue
		}
		f := sc.frames[i]
		if f.Type != "agent.tool_call" {
			continue
		}
		id := f.str("call_id")
		k := sc.calls[id]
		if k == nil {
			name := f.str("name")
			k = &agentCall{id: id, name: name, args: f.obj("arguments"), slot: sc.slotOfConnOrPrev(e.Conn, i),
				builtin: name == "wait" || name == "cancel" || name == "status"}
			sc.calls[id] = k
		}
		k.sends = append(k.sends, i)
	}
	for _, sl := range sc.slots {
		if sl.role != "agent" {
			continue
		}
		for _, sf := range sl.stream {
			f := sf.f
			switch f.Type {
			case "agent.tool_result":
				id := f.str("call_id")
				k := sc.calls[id]
				if k == nil {
					sc.violate(KindErrorFrame, []int{sf.ev}, "agent.tool_result for %q, a call the agent never made", id)
					continue
				}
				k.results = append(k.results, sf)
			case "agent.prompt":
				if id := completionPromptCall(f.str("text")); id != "" {
					if k := sc.calls[id]; k != nil {
						k.prompts = append(k.prompts, sf)
					} else {
						sc.violate(KindPrompt, []int{sf.ev}, "completion prompt for %q, a call the agent never made", id)
					}
				}
			case "error":
				ref := f.str("ref")
				req, ok := sc.request(ref)
				if ok && req.Type == "agent.tool_call" && f.str("code") == "bad_frame" && strings.Contains(f.str("message"), "already used") {
					k := sc.calls[req.str("call_id")]
					if k != nil && len(k.sends) > 0 && k.sends[0] != sc.sentID[ref] {
						k.refusedAt = append(k.refusedAt, sf.ev)
						continue
					}
				}
				if f.str("code") == "internal" && f.bool("retryable") {
					continue
				}
				what := "a frame"
				evs := []int{sf.ev}
				if ok {
					what = describe(req)
					evs = []int{sc.sentID[ref], sf.ev}
				}
				sc.violate(KindErrorFrame, evs, "the agent got error %s (%s) for %s", f.str("code"), f.str("message"), what)
			}
		}
	}
	ids := make([]string, 0, len(sc.calls))
	for id := range sc.calls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Built-ins first, in two passes: what waits consumed and cancels requested, then the
	// answers that depend on all of that.
	for pass := 1; pass <= 2; pass++ {
		for _, id := range ids {
			k := sc.calls[id]
			if !k.builtin || len(k.results) == 0 {
				continue
			}
			r := k.results[0]
			if pass == 1 {
				if len(k.results) > 1 {
					sc.violate(KindResultTwice, []int{k.results[0].ev, k.results[1].ev}, "built-in call %s (%s) answered twice", id, k.name)
				}
				if r.f.str("kind") == "background_placeholder" {
					sc.violate(KindResultTwice, []int{r.ev}, "built-in call %s (%s) went to the background", id, k.name)
				}
			}
			if r.f.str("kind") == "background_placeholder" {
				continue
			}
			c := parseContent(r.f.str("content"))
			switch k.name {
			case "wait":
				sc.waitAnswer(k, r, c, pass)
			case "cancel":
				sc.cancelAnswer(k, r, c, pass)
			}
		}
	}
	for _, id := range ids {
		k := sc.calls[id]
		if k.builtin {
			continue
		}
		var ph, direct []slotFrame
		for _, r := range k.results {
			if r.f.str("kind") == "background_placeholder" {
				ph = append(ph, r)
			} else {
				direct = append(direct, r)
			}
		}
		switch {
		case len(ph) > 1:
			sc.violate(KindResultTwice, []int{ph[0].ev, ph[1].ev}, "call %s got two background placeholders", id)
		case len(direct) > 1:
			sc.violate(KindResultTwice, []int{direct[0].ev, direct[1].ev}, "call %s got two results", id)
		case len(ph) > 0 && len(direct) > 0:
			sc.violate(KindResultTwice, []int{ph[0].ev, direct[0].ev}, "call %s got a direct result besides its background placeholder", id)
		}
		if len(k.consumed) > 1 {
			sc.violate(KindResultTwice, []int{k.consumed[0].ev, k.consumed[1].ev}, "the result of %s was delivered to two waits (%s, %s)", id, k.consumed[0].by, k.consumed[1].by)
		}
		if len(direct) > 0 && len(k.consumed) > 0 {
			sc.violate(KindResultTwice, []int{direct[0].ev, k.consumed[0].ev}, "call %s got its result directly and again through wait %s", id, k.consumed[0].by)
		}
		for _, w := range k.consumed {
			if len(ph) == 0 || ph[0].seq > w.seq {
				sc.violate(KindWaitAnswer, []int{w.ev}, "wait %s delivered the result of %s, which never went to the background before", w.by, id)
			}
		}
		for i, p := range k.prompts {
			switch {
			case i > 0:
				sc.violate(KindPrompt, []int{k.prompts[0].ev, p.ev}, "call %s got a second completion prompt", id)
			case len(ph) == 0 || ph[0].seq > p.seq:
				sc.violate(KindPrompt, []int{p.ev}, "completion prompt for %s, which was not in the background", id)
			case len(k.consumed) > 0 && k.consumed[0].seq < p.seq:
				sc.violate(KindPrompt, []int{k.consumed[0].ev, p.ev}, "completion prompt for %s after its result was consumed", id)
			}
		}
	}
}

// waitTarget returns the call an exact wait names ("" for a bare wait).
func waitTarget(k *agentCall) (string, bool) {
	raw, ok := k.args["tool_call_id"]
	if !ok {
		return "", false
	}
	return rawStr(raw), true
}

// waitAnswer books (pass 1) or judges (pass 2) the answer r (content c) of wait k.
func (sc *sessionCheck) waitAnswer(k *agentCall, r slotFrame, c content, pass int) {
	target, exact := waitTarget(k)
	if c.headers["wait_outcome"] == "interrupted" {
		return
	}
	if e, ok := c.headers["error"]; ok && waitErrors[e] {
		if pass == 2 {
			sc.waitError(k, r, e, target, exact)
		}
		return
	}
	if pass == 2 {
		return
	}
	if !exact {
		target = c.headers["original_tool_call_id"]
		if target == "" {
			sc.violate(KindWaitAnswer, []int{r.ev}, "bare wait %s returned a result without original_tool_call_id", k.id)
			return
		}
	}
	t := sc.calls[target]
	if t == nil || t.builtin {
		sc.violate(KindWaitAnswer, []int{r.ev}, "wait %s returned a result for %q, which is no host call of the agent", k.id, target)
		return
	}
	t.consumed = append(t.consumed, consumption{by: k.id, seq: r.seq, ev: r.ev, c: c})
}

func (sc *sessionCheck) waitError(k *agentCall, r slotFrame, e, target string, exact bool) {
	switch e {
	case msgUnknownID:
		if t := sc.calls[target]; t != nil && !t.builtin {
			if ev, ok := sc.knownBefore(t, k, r); ok {
				sc.violate(KindUnknownAccepted, []int{ev, r.ev}, "wait %s for %s answered %q, but the broker had accepted %s", k.id, target, e, target)
			}
		}
	case msgAlreadyConsumed:
		t := sc.calls[target]
		if t == nil {
			return
		}
		if !sc.hasOutcome(t) {
			sc.violate(KindPhantomConsumed, []int{r.ev}, "wait %s for %s answered %q, but no result of %s ever reached the agent", k.id, target, e, target)
		}
	case msgAlreadyWaited:
		if !sc.otherWaitBlocked(k, r, func(o *agentCall) bool { t, ex := waitTarget(o); return ex && t == target }) {
			sc.violate(KindWaitAnswer, []int{r.ev}, "wait %s for %s answered %q, but no other wait for it was blocked", k.id, target, e)
		}
	case msgBarePending:
		if !sc.otherWaitBlocked(k, r, func(o *agentCall) bool { _, ex := waitTarget(o); return !ex }) {
			sc.violate(KindWaitAnswer, []int{r.ev}, "bare wait %s answered %q, but no other bare wait was blocked", k.id, e)
		}
	case msgNoBackground:
		if exact {
			return
		}
		for _, id := range sortedKeys(sc.calls) {
			t := sc.calls[id]
			if t.builtin || t.slot != k.slot {
				continue
			}
			ph := firstPlaceholder(t)
			if ph == nil || ph.seq > r.seq {
				continue
			}
			consumedBefore := false
			for _, w := range t.consumed {
				if w.seq < r.seq {
					consumedBefore = true
				}
			}
			if !consumedBefore {
				sc.violate(KindWaitAnswer, []int{ph.ev, r.ev}, "bare wait %s answered %q while %s was in the background, unconsumed", k.id, e, id)
				return
			}
		}
	}
}

// knownBefore reports whether the broker had accepted call t before it answered k with r: t
// got a result frame with a lower seq, or t was sent on k's connection before k (frames of
// one connection are applied in order) and not refused. It returns the event proving it.
func (sc *sessionCheck) knownBefore(t, k *agentCall, r slotFrame) (int, bool) {
	for _, tr := range t.results {
		if tr.seq < r.seq && sc.sameSlot(tr.ev, r.ev) {
			return tr.ev, true
		}
	}
	if len(k.sends) == 0 {
		return 0, false
	}
	kc := sc.h.Events[k.sends[0]].Conn
	for _, s := range t.sends {
		if sc.h.Events[s].Conn == kc && s < k.sends[0] && sc.answeredOnConn(t, s) {
			return s, true
		}
	}
	return 0, false
}

// answeredOnConn reports whether send s of call t was applied as the call itself (not
// refused as a duplicate id).
func (sc *sessionCheck) answeredOnConn(t *agentCall, s int) bool {
	for _, ev := range t.refusedAt {
		if ref := sc.frames[ev].str("ref"); ref != "" && sc.sentID[ref] == s {
			return false
		}
	}
	return true
}

func (sc *sessionCheck) sameSlot(a, b int) bool {
	ca, cb := sc.h.Events[a].Conn, sc.h.Events[b].Conn
	return ca >= 0 && cb >= 0 && sc.conns[ca].slot == sc.conns[cb].slot
}

// otherWaitBlocked reports whether another wait matching m, sent before k was answered, was
// still blocked then (answered later, by seq, or never).
func (sc *sessionCheck) otherWaitBlocked(k *agentCall, r slotFrame, m func(*agentCall) bool) bool {
	for _, o := range sc.calls {
		if o == k || o.name != "wait" || o.slot != k.slot || len(o.sends) == 0 || o.sends[0] > r.ev || !m(o) {
			continue
		}
		if len(o.results) == 0 || o.results[0].seq > r.seq {
			return true
		}
	}
	return false
}

func firstPlaceholder(t *agentCall) *slotFrame {
	for i := range t.results {
		if t.results[i].f.str("kind") == "background_placeholder" {
			return &t.results[i]
		}
	}
	return nil
}

// hasOutcome reports whether call t's outcome reached the agent (directly or through a wait).
func (sc *sessionCheck) hasOutcome(t *agentCall) bool {
	if len(t.consumed) > 0 {
		return true
	}
	for _, r := range t.results {
		if r.f.str("kind") != "background_placeholder" {
			return true
		}
	}
	return false
}

// outcomeOf returns the outcome content of call t and its event.
func (sc *sessionCheck) outcomeOf(t *agentCall) (content, int, bool) {
	for _, r := range t.results {
		if r.f.str("kind") != "background_placeholder" {
			return parseContent(r.f.str("content")), r.ev, true
		}
	}
	if len(t.consumed) > 0 {
		return t.consumed[0].c, t.consumed[0].ev, true
	}
	return content{}, -1, false
}

// cancelAnswer books (pass 1) or judges (pass 2) the answer r (content c) of the built-in
// cancel k.
func (sc *sessionCheck) cancelAnswer(k *agentCall, r slotFrame, c content, pass int) {
	target := rawStr(k.args["tool_call_id"])
	t := sc.calls[target]
	e, isErr := c.headers["error"]
	if pass == 1 {
		if !isErr && c.body == msgCancelRequested && t != nil && !t.builtin {
			t.requested = append(t.requested, r)
		}
		return
	}
	switch {
	case !isErr && c.body == msgCancelRequested:
		if t == nil || t.builtin {
			sc.violate(KindCancelAnswer, []int{r.ev}, "cancel %s of %q answered %q, but that is no host call", k.id, target, c.body)
		}
	case !isErr:
		sc.violate(KindCancelAnswer, []int{r.ev}, "cancel %s answered %q", k.id, c.body)
	case e == msgUnknownID:
		if t != nil && !t.builtin {
			if ev, ok := sc.knownBefore(t, k, r); ok {
				sc.violate(KindUnknownAccepted, []int{ev, r.ev}, "cancel %s of %s answered %q, but the broker had accepted %s", k.id, target, e, target)
			}
		}
	case e == msgAlreadyCanceled:
		if t == nil {
			return
		}
		for _, q := range t.requested {
			if q.seq < r.seq {
				return
			}
		}
		sc.violate(KindCancelAnswer, []int{r.ev}, "cancel %s of %s answered %q, but the agent had not cancelled it (SPEC 13: a call cancelled by someone else is %q)", k.id, target, e, msgAlreadyDone)
	case e == msgCannotCancel:
		if t != nil && !t.builtin {
			sc.violate(KindCancelAnswer, []int{r.ev}, "cancel %s of host call %s answered %q", k.id, target, e)
		}
	}
}

// crossCheck compares each agent call's outcome with what its job's host saw, and requires
// an outcome for every call the broker accepted.
func (sc *sessionCheck) crossCheck() {
	agentLost := false
	for _, sl := range sc.slots {
		if sl.role == "agent" && sl.lost {
			agentLost = true
		}
	}
	for _, id := range sortedKeys(sc.calls) {
		k := sc.calls[id]
		if k.slot >= 0 && sc.slots[k.slot].lost || k.slot < 0 && agentLost {
			continue
		}
		exemptEnd := sc.ended && sc.endPhase >= 0 && len(k.sends) > 0 && k.sends[0] > sc.endPhase
		if k.builtin {
			if len(k.results) == 0 && !exemptEnd && sc.accepted(k) {
				sc.violate(KindNoOutcome, k.sends, "built-in call %s (%s) was never answered", id, k.name)
			}
			continue
		}
		jobIDs := sc.byAcid[id]
		var j *hostJob
		if len(jobIDs) > 0 {
			j = sc.jobs[jobIDs[0]]
		}
		c, ev, ok := sc.outcomeOf(k)
		if !ok {
			if !exemptEnd && sc.accepted(k) {
				what := "no result"
				if firstPlaceholder(k) != nil {
					what = "a background placeholder, but its result never reached a wait"
				}
				evs := append([]int(nil), k.sends...)
				if j != nil {
					evs = append(evs, j.ev)
				}
				sc.violate(KindNoOutcome, evs, "call %s (%s %s) got %s", id, k.name, rawStr(k.args["op"]), what)
			}
			continue
		}
		class, detail := classify(c)
		if len(k.requested) > 0 && class != outCanceled {
			sc.violate(KindOutcomeMismatch, []int{k.requested[0].ev, ev}, "call %s: its cancel was %q, but its outcome is %s (%s)", id, msgCancelRequested, class, detail)
		}
		if j == nil {
			continue
		}
		if class == outStartFailed {
			sc.violate(KindStartFailedDispatched, []int{ev, j.ev}, "call %s was answered %q, but the host got its tool_call %s", id, detail, j.callID)
			continue
		}
		if len(j.cancels) > 0 {
			want := outCanceled
			reason := j.cancels[0].f.str("reason")
			if reason == "timeout" {
				want = outTimedOut
			}
			if class != want {
				sc.violate(KindOutcomeMismatch, []int{j.cancels[0].ev, ev}, "job %s got tool_cancel %s, but the agent's outcome of %s is %s (%s)", j.callID, reason, id, class, detail)
			}
			switch {
			case reason == "agent_request" && len(k.requested) == 0:
				sc.violate(KindCancelAnswer, []int{j.cancels[0].ev}, "job %s was cancelled at the agent's request, but no cancel of %s was answered %q", j.callID, id, msgCancelRequested)
			case reason == "host_request" && len(j.hostCancelled) == 0 && !sc.slotLost(j.slot):
				sc.violate(KindCancelAnswer, []int{j.cancels[0].ev}, "job %s was cancelled at the host's request, but no job.cancel of it was answered cancelled", j.callID)
			case reason != "agent_request" && len(k.requested) > 0:
				sc.violate(KindOutcomeMismatch, []int{k.requested[0].ev, j.cancels[0].ev}, "the agent's cancel of %s was %q, but its tool_cancel reason is %s", id, msgCancelRequested, reason)
			}
		}
		if n := len(k.requested) + len(j.hostCancelled); n > 1 {
			evs := []int{}
			for _, q := range k.requested {
				evs = append(evs, q.ev)
			}
			evs = append(evs, j.hostCancelled...)
			sc.violate(KindCancelledTwice, evs, "job %s (%s) was cancelled %d times", j.callID, id, n)
		}
		switch class {
		case outCanceled, outTimedOut:
			if len(j.cancels) == 0 && sc.settledAfter(j.slot, ev) {
				sc.violate(KindCancelLost, []int{j.ev, ev}, "call %s ended %s, but the host never got a tool_cancel of %s", id, class, j.callID)
			}
		case outCompleted:
			if !contains(j.outputs, detail) {
				sc.violate(KindOutcomeMismatch, []int{j.ev, ev}, "call %s completed with %q, which its host never sent (it sent %q)", id, detail, j.outputs)
			}
		case outFailed:
			if !contains(j.errors, detail) {
				sc.violate(KindOutcomeMismatch, []int{j.ev, ev}, "call %s failed with %q, which its host never sent (it sent %q)", id, detail, j.errors)
			}
		}
	}
	// call_finished for a job that never ended.
	for _, id := range sortedKeys(sc.jobs) {
		j := sc.jobs[id]
		if len(j.finishedErrs) == 0 || len(j.cancels) > 0 {
			continue
		}
		ended := false
		if k := sc.calls[j.acid]; k != nil {
			if c, _, ok := sc.outcomeOf(k); ok {
				cl, _ := classify(c)
				ended = cl == outCompleted || cl == outFailed
			}
		}
		if !ended && !j.resultSent {
			sc.violate(KindErrorFrame, j.finishedErrs, "job %s was answered call_finished, but it never ended", id)
		}
	}
}

// deadlineSlack is how late past its deadline a job's tool_cancel may come (the deadline
// poller's period, the transition, the frame's way to the host).
const deadlineSlack = 5 * time.Second

// deadlinePass finds jobs that outlived their clocks (SPEC 5): a job its host got, with no
// tool_cancel and no result sent, whose host slot answered a sync barrier well after the
// job's deadline — its tool_cancel would have been among the frames before that answer.
func (sc *sessionCheck) deadlinePass() {
	for _, id := range sortedKeys(sc.jobs) {
		j := sc.jobs[id]
		if j.ev < 0 || sc.slotLost(j.slot) || len(j.cancels) > 0 || j.resultSent || j.timeoutMS <= 0 {
			continue
		}
		deadline, what := j.lastActivity.Add(time.Duration(j.timeoutMS)*time.Millisecond), fmt.Sprintf("its timeout_ms %d", j.timeoutMS)
		if j.deadlineMS > 0 {
			deadline, what = time.UnixMilli(j.deadlineMS), fmt.Sprintf("its deadline_ms %d", j.deadlineMS)
		}
		if sc.ended && sc.endSent >= 0 && !sc.h.Events[sc.endSent].At.After(deadline.Add(deadlineSlack)) {
			continue // discarded by the end of the session instead
		}
		for _, sf := range sc.slots[j.slot].stream {
			if sf.f.Type != "job.cancel_result" {
				continue
			}
			req, ok := sc.request(sf.f.str("ref"))
			at := sc.h.Events[sf.ev].At
			if !ok || req.str("call_id") != barrierCallID || !sc.h.Events[sc.sentID[sf.f.str("ref")]].At.After(deadline.Add(deadlineSlack)) {
				continue
			}
			sc.violate(KindDeadlineMissed, []int{j.ev, sf.ev}, "job %s (%s %s) was still open %.1fs past %s: no tool_cancel before the host's barrier answered",
				id, j.name, j.acid, at.Sub(deadline).Seconds(), what)
			break
		}
	}
}

// deferPass checks that accepted defers stay accepted.
func (sc *sessionCheck) deferPass() {
	for _, id := range sortedKeys(sc.jobs) {
		j := sc.jobs[id]
		if j.deadlineMS == 0 || j.slot < 0 {
			continue
		}
		deadline := time.UnixMilli(j.deadlineMS)
		if len(j.cancels) > 0 && j.cancels[0].f.str("reason") == "timeout" && j.cancels[0].seq > j.ackSeq {
			if at := sc.h.Events[j.cancels[0].ev].At; at.Before(deadline.Add(-time.Second)) {
				sc.violate(KindDeferLost, []int{j.cancels[0].ev}, "job %s timed out %.1fs before the deadline_ms %d of its accepted defer (its ordinary clock fired)",
					id, deadline.Sub(at).Seconds(), j.deadlineMS)
			}
		}
		// The agent's outcome shows which result completed the job.
		k := sc.calls[j.acid]
		if k == nil {
			continue
		}
		c, _, ok := sc.outcomeOf(k)
		if !ok {
			continue
		}
		class, detail := classify(c)
		if class != outCompleted && class != outFailed {
			continue
		}
		var done *resultSend
		for i := range j.resultsAfter {
			if r := &j.resultsAfter[i]; r.output == detail && r.isErr == (class == outFailed) {
				done = r
				break
			}
		}
		if done == nil {
			continue
		}
		sl := sc.slots[j.slot]
		for _, sf := range sl.stream {
			if sf.f.Type != "tool_deferred_resume" || sf.seq < j.ackSeq || sf.ev > done.ev {
				continue
			}
			listed := false
			for _, raw := range sf.f.arr("jobs") {
				var rj struct {
					CallID string `json:"call_id"`
				}
				_ = json.Unmarshal(raw, &rj)
				listed = listed || rj.CallID == id
			}
			if !listed && (len(j.cancels) == 0 || j.cancels[0].seq > sf.seq) {
				sc.violate(KindDeferLost, []int{sf.ev, done.ev}, "tool_deferred_resume left out %s, deferred (ack seq %d) and still live: it completed later with this result",
					id, j.ackSeq)
			}
		}
	}
}

// accepted reports whether the broker accepted call k: it answered it (or its host got it),
// a resend was refused as a duplicate, or a later request on its connection was answered
// (frames of one connection are applied in order).
func (sc *sessionCheck) accepted(k *agentCall) bool {
	if len(k.results) > 0 || len(sc.byAcid[k.id]) > 0 || len(k.refusedAt) > 0 {
		return true
	}
	for _, s := range k.sends {
		if sc.appliedByOrder(s) {
			return true
		}
	}
	return false
}

// appliedByOrder reports whether a request sent after Sent event s on the same connection was
// answered (so s was applied too).
func (sc *sessionCheck) appliedByOrder(s int) bool {
	c := sc.conns[sc.h.Events[s].Conn]
	if c.slot < 0 {
		return false
	}
	sl := sc.slots[c.slot]
	for _, o := range c.sends {
		if o <= s {
			continue
		}
		f := sc.frames[o]
		if id := f.str("id"); id != "" && len(sl.byRef[id]) > 0 {
			return true
		}
	}
	return false
}

// settledAfter reports whether host slot s answered a sync barrier after event ev: every
// frame the broker queued for it before then has been seen.
func (sc *sessionCheck) settledAfter(s, ev int) bool {
	if s < 0 || sc.slots[s].lost {
		return false
	}
	for _, sf := range sc.slots[s].stream {
		if sf.f.Type != "job.cancel_result" || sf.ev < ev {
			continue
		}
		if req, ok := sc.request(sf.f.str("ref")); ok && req.str("call_id") == barrierCallID && sc.sentID[sf.f.str("ref")] > ev {
			return true
		}
	}
	return false
}

func (sc *sessionCheck) slotLost(s int) bool { return s < 0 || sc.slots[s].lost }

// requestsPass requires an answer for every request that the broker provably applied.
func (sc *sessionCheck) requestsPass() {
	for _, c := range sc.conns {
		if c.slot < 0 || sc.slots[c.slot].lost {
			continue
		}
		sl := sc.slots[c.slot]
		for _, s := range c.sends {
			f := sc.frames[s]
			id := f.str("id")
			switch f.Type {
			case "tool_deferred", "job.cancel", "tools.declare", "tool_interaction_update":
			default:
				continue
			}
			if id == "" || len(sl.byRef[id]) > 0 {
				continue
			}
			if sc.ended && c.endedEv >= 0 {
				continue // the session ended: requests cut off by the end are not answered
			}
			if sc.appliedByOrder(s) {
				sc.violate(KindRequestLost, []int{s}, "%s on c%d was never answered, though a later request on the connection was", describe(f), c.idx)
			}
		}
	}
}

// endPass checks what the spec says of the end of a session (SPEC 3.6).
func (sc *sessionCheck) endPass() {
	if !sc.ended {
		return
	}
	for _, c := range sc.conns {
		if c.endedEv < 0 {
			continue
		}
		if sc.endSent < 0 || sc.endSent > c.endedEv {
			sc.violate(KindUnexpectedEnd, []int{c.endedEv}, "session.ended (%s) on c%d, but nobody sent session.end", sc.frames[c.endedEv].str("reason"), c.idx)
		}
	}
	for _, id := range sortedKeys(sc.jobs) {
		j := sc.jobs[id]
		if j.ev < 0 || sc.slotLost(j.slot) || len(j.cancels) > 0 || j.resultSent {
			continue
		}
		sl := sc.slots[j.slot]
		got := false
		for _, sf := range sl.stream {
			if sf.f.Type == "session.ended" {
				got = true
			}
		}
		if !got {
			continue
		}
		if k := sc.calls[j.acid]; k != nil && sc.hasOutcome(k) {
			continue
		}
		sc.violate(KindNotDiscarded, []int{j.ev}, "job %s (%s) was open when the session ended, but got no tool_cancel", id, j.acid)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// describe names a frame in a message: its type and the ids that matter.
func describe(f *frame) string {
	var b strings.Builder
	b.WriteString(f.Type)
	for _, k := range []string{"id", "ref", "call_id", "handle", "seq"} {
		if f.has(k) {
			fmt.Fprintf(&b, " %s=%s", k, strings.Trim(string(f.m[k]), `"`))
		}
	}
	return b.String()
}

// trace renders a violation: the seed, the session, and the events around the ones at
// fault (on their connections).
func (sc *sessionCheck) trace(v Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s session %s (%s)] %s: %s\n", sc.h.Run, sc.h.Session, sc.h.SessionID, v.Kind, v.Msg)
	show := map[int]bool{}
	for _, ev := range v.Events {
		if ev < 0 || ev >= len(sc.h.Events) {
			continue
		}
		show[ev] = true
		conn := sc.h.Events[ev].Conn
		before, after := 0, 0
		for i := ev - 1; i >= 0 && before < 2; i-- {
			if sc.h.Events[i].Conn == conn {
				show[i] = true
				before++
			}
		}
		for i := ev + 1; i < len(sc.h.Events) && after < 2; i++ {
			if sc.h.Events[i].Conn == conn {
				show[i] = true
				after++
			}
		}
	}
	idx := make([]int, 0, len(show))
	for i := range show {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	if len(idx) > 24 {
		idx = idx[:24]
	}
	at := func(i int) string {
		if len(sc.h.Events) == 0 {
			return ""
		}
		return fmt.Sprintf("+%.3fs", sc.h.Events[i].At.Sub(sc.h.Events[0].At).Seconds())
	}
	fault := map[int]bool{}
	for _, ev := range v.Events {
		fault[ev] = true
	}
	for _, i := range idx {
		e := sc.h.Events[i]
		mark := " "
		if fault[i] {
			mark = ">"
		}
		who := "session"
		if e.Conn >= 0 && e.Conn < len(sc.h.Conns) {
			who = fmt.Sprintf("c%d %s@%s", e.Conn, sc.h.Conns[e.Conn].Role, strings.TrimPrefix(sc.h.Conns[e.Conn].Node, "http://"))
		}
		raw := string(e.Raw)
		if len(raw) > 400 {
			raw = raw[:400] + "…"
		}
		fmt.Fprintf(&b, "  %s #%d %s %s %-6s %s\n", mark, i, at(i), who, e.Dir, raw)
	}
	return b.String()
}

// Summarize groups violations by kind: counts, the sessions they hit, and up to examples
// traces of each kind.
func Summarize(vs []Violation, examples int) string {
	if len(vs) == 0 {
		return "no violations"
	}
	by := map[string][]Violation{}
	for _, v := range vs {
		by[v.Kind] = append(by[v.Kind], v)
	}
	kinds := sortedKeys(by)
	sort.SliceStable(kinds, func(i, j int) bool { return len(by[kinds[i]]) > len(by[kinds[j]]) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d violation(s):\n", len(vs))
	for _, k := range kinds {
		runs := map[string]bool{}
		for _, v := range by[k] {
			runs[v.Run] = true
		}
		fmt.Fprintf(&b, "  %-34s %4d  (runs: %s)\n", k, len(by[k]), strings.Join(sortedKeys(runs), ", "))
	}
	for _, k := range kinds {
		for i, v := range by[k] {
			if i >= examples {
				break
			}
			b.WriteString("\n")
			b.WriteString(v.Trace)
		}
	}
	return b.String()
}
