package broker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/broker/voice"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// Session is one conversation between a caller and an agent, with its host connections
// (SPEC 1). Everything a session owns is changed only by its own events, run one at a time by
// its mailbox, so none of it needs a lock.
type Session struct {
	node      *Node
	id        string
	tenant    string
	joinToken string   // given out when the session is created; "" for one taken back (park.go)
	joinHash  [32]byte // what a join token is checked against
	// callerToken is the end user's token (SPEC 3.1): it attaches a caller only and reaches only
	// the WebRTC signaling. Given out once, in the answer to POST /v1/sessions.
	callerToken string
	callerHash  [32]byte
	created     time.Time
	mb          mailbox
	journaled   atomic.Bool // its record is in the journal, under this node's lease (journal.go)
	counted     bool        // it counts toward its tenant\'s open sessions on this node (guarded by the node\'s mu)
	agentSum    uint64      // the hash of the text agent's state last journaled
	// settledPending are the text agent's settled calls not journaled yet (encoded), and
	// settledReset tells that they replace the journaled ones.
	settledPending [][]byte
	settledReset   bool
	// agentDirty: an event may have changed the text agent's state since it was last journaled.
	agentDirty bool
	// held are the frames of the session's outboxes no connection has seen yet: they wait for
	// the journal (held.go). unheld: the session ends, frames go out at once.
	held      []heldFrame
	unheld    bool
	heldRetry backoff.BackOff // the retries of a failed journal write
	heldTimer Timer
	writing   *heldWrite // the journal write in flight, if any (one at a time)
	// takenOverMS is when this node took the session over from the journal of a node that
	// died (epoch ms; 0: it did not).
	takenOverMS int64
	heldSkip    bool // a write just failed: not again at the end of its own event
	// settledGen counts the resets of settledPending (a write's count of it is stale after one).
	settledGen int

	// Owned by the session's events.
	slots   map[string]*Slot
	orders  int
	caller  *Slot
	agent   *Slot
	ended   bool
	endInfo *endedSession   // once ended: what late hellos are answered from
	idle    Timer           // ends the session when nothing was attached for the resume window
	expired map[string]bool // ids of slots whose resume window ran out
	callSeq map[string]callOut
	// cancelSent: for a session taken over from a dead node, the jobs whose tool_cancel the
	// journal had (reconcile.go); none gets a second one.
	cancelSent map[string]bool
	// finished are the jobs whose end the session handled (a change that comes twice — relayed,
	// and found by reconcile — is handled once).
	finished map[string]bool
	// restoring: the session was rebuilt from the store (Node.restore) and has not caught up
	// yet (takenBack); reconcile waits for it — its callSeq still names every job the journal
	// ever dispatched, ended and told or not.
	restoring bool
	text      *textAgent // the text agent's side, once one attached
	// openJobs counts the session's open jobs made on this node (SPEC 2: 256 at most).
	openJobs int
	voice    *voice.Voice // the voice side, once a caller attached
	port     *AgentPort   // the MCP facade's agent, while an MCP session is open
	modelCfg ModelConfig  // the session's model (POST /v1/sessions)
	// adopt: the session was taken back from the store (park.go); its voice side, once a caller
	// is back, adopts the open jobs and parked completions of the earlier node.
	adopt  bool
	parked []voice.Completion
}

// callOut is where a job's tool_call went: the slot and the seq it got there.
type callOut struct {
	slot string
	seq  int64
}

// end reasons (SPEC 3.6).
const (
	endEnded         = frames.EndReasonEnded
	endHungUp        = frames.EndReasonHungUp
	endResumeExpired = frames.EndReasonResumeExpired
)

func newSession(n *Node, tenant string) *Session {
	s := sessionOf(n, "sess_"+randomID(20), tenant, n.cfg.Clock.Now())
	s.joinToken = "jt_" + randomToken(24)
	// ct_ + 24 random bytes, like the join token: at least 128 random bits (SPEC 3.1).
	s.callerToken = "ct_" + randomToken(24)
	s.joinHash = hashToken(s.joinToken)
	s.callerHash = hashToken(s.callerToken)
	return s
}

// sessionOf is where every Session is made — a new one (newSession) and one rebuilt from the
// store, parked or journaled by a node that died (Node.restore): its identity, its empty
// parts, and the journal's turn after each of its events.
func sessionOf(n *Node, id, tenant string, created time.Time) *Session {
	s := &Session{node: n, id: id, tenant: tenant, created: created,
		slots: make(map[string]*Slot), expired: make(map[string]bool), callSeq: make(map[string]callOut)}
	s.mb.after = s.flushHeld
	return s
}

// ID is the session id.
func (s *Session) ID() string { return s.id }

// JoinToken is the token that lets further connections attach to the session (SPEC 3.1).
func (s *Session) JoinToken() string { return s.joinToken }

// CallerToken is the end user's token of the session: it attaches a caller only (SPEC 3.1).
func (s *Session) CallerToken() string { return s.callerToken }

// Tenant is the session's tenant.
func (s *Session) Tenant() string { return s.tenant }

// start arms the idle timer of a new session: nothing attached yet (SPEC 10).
func (s *Session) start() {
	s.mb.post(func() { s.saveJournal(); s.armIdle() }, false)
}

func (s *Session) ctx() context.Context { return s.node.ctx }

func (s *Session) engine() *jobs.Engine { return s.node.engine }

// post queues fn as an event of the session; it reports false once the session has ended.
func (s *Session) post(fn func()) bool { return s.mb.post(fn, false) }

// after runs fn as an event of the session after d of the node's clock. The returned timer
// may be stopped; once stopped it keeps nothing of the session alive (sessionTimer).
func (s *Session) after(d time.Duration, fn func()) Timer {
	st := &sessionTimer{}
	ev := func() { s.post(fn) }
	st.fn.Store(&ev)
	st.t = s.node.cfg.Clock.AfterFunc(d, st.fire)
	return st
}

// sessionTimer is a timer of a session that lets go of its function when it is stopped. Go
// keeps a stopped timer, with its function, in its timer heap until the moment it was due
// (or until enough of the heap is stopped timers): a stopped resume window would keep its
// session — its tools and their compiled schemas — alive for minutes after the session ended.
type sessionTimer struct {
	t  Timer
	fn atomic.Pointer[func()]
}

func (st *sessionTimer) fire() {
	if fn := st.fn.Swap(nil); fn != nil {
		(*fn)()
	}
}

// Stop implements Timer.
func (st *sessionTimer) Stop() bool {
	st.fn.Store(nil)
	return st.t.Stop()
}

// now is the time of the node's clock.
func (s *Session) now() time.Time { return s.node.cfg.Clock.Now() }

// drainChanges handles every job change queued so far, before the event in progress goes on.
func (s *Session) drainChanges() {
	for {
		fn, ok := s.mb.nextChange()
		if !ok {
			return
		}
		fn()
	}
}

// attached reports whether any slot has a connection (or an MCP client is attached).
func (s *Session) attached() bool {
	if s.port != nil {
		return true
	}
	for _, sl := range s.slots {
		if sl.client != nil {
			return true
		}
	}
	return false
}

// armIdle starts the resume window of a session with nothing attached (SPEC 10): when it runs
// out with still nothing attached, the session ends with reason resume_expired.
func (s *Session) armIdle() {
	if s.ended || s.attached() || s.idle != nil {
		return
	}
	s.armIdleAfter(s.node.cfg.ResumeWindow)
}

// armIdleAfter ends the session after d unless a connection attaches first.
func (s *Session) armIdleAfter(d time.Duration) {
	s.idle = s.after(d, func() {
		s.idle = nil
		if !s.ended && !s.attached() {
			s.end(endResumeExpired)
		}
	})
}

func (s *Session) stopIdle() {
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
}

// record appends session-level timeline entries.
func (s *Session) record(kind string, detail map[string]any) {
	s.recordAbout("", "", kind, detail)
}

// recordAbout appends a timeline entry about a job (call id and handle at the top level).
func (s *Session) recordAbout(callID, handle, kind string, detail map[string]any) {
	e := jobs.Entry{Kind: kind, CallID: callID, Handle: handle, Detail: detail}
	if err := s.engine().Record(s.ctx(), s.tenant, s.id, e); err != nil {
		s.node.log.Warn("broker: timeline entry lost", "session", s.id, "kind", kind, "err", err)
	}
}

// send puts a frame in a slot's outbox under the slot's next seq and hands it to the slot's
// connection, if one is attached. It returns the seq.
func (s *Session) send(sl *Slot, f frames.Frame) int64 {
	data, err := frames.Encode(f)
	if err != nil {
		s.node.log.Error("broker: encode frame", "type", f.FrameType(), "err", err)
		ie := frames.Errorf(frames.CodeInternal, "internal error encoding a %s frame", f.FrameType())
		data, _ = frames.Encode(ie)
		f = ie
	}
	typ := f.FrameType()
	return s.put(sl, f, func(seq int64) []byte { return withSeq(data, typ, seq) }, true)
}

// put puts a frame, rendered with its seq, in a slot's outbox and hands it to the slot's
// connection, if one is attached — on a journaling store once the journal has it (held.go;
// journal false: its transition journaled it).
func (s *Session) put(sl *Slot, f frames.Frame, render func(seq int64) []byte, journal bool) int64 {
	of := sl.out.push(render)
	s.node.metrics.framesOut.Inc()
	if e, ok := f.(*frames.Error); ok {
		s.node.metrics.errors.WithLabelValues(string(e.Code)).Inc()
	}
	if s.holding() {
		s.hold(sl, of.seq, of.data, !journal) // no connection sees it before the journal has it
		return of.seq
	}
	if sl.client != nil {
		sl.client.tr.Send(of.data)
		sl.sent = of.seq
	}
	return of.seq
}

// sendError answers a client frame with an error frame (SPEC 2.1).
func (s *Session) sendError(sl *Slot, ref string, e *frames.Error) {
	c := *e
	c.Ref = ref
	s.send(sl, &c)
}

// end ends the session (SPEC 3.6): every open job is cancelled with reason discard (their
// tool_cancel frames go out first), then every connection gets session.ended as its last frame
// and is closed with 1000, and the timeline gets session_end. Later hellos get session_ended.
func (s *Session) end(reason frames.EndReason) {
	if s.ended {
		return
	}
	s.stopIdle()
	open, err := s.engine().OpenJobs(s.ctx(), s.tenant, s.id)
	if err != nil {
		s.node.log.Error("broker: listing open jobs at session end", "session", s.id, "err", err)
	}
	for _, j := range open {
		if _, _, err := s.engine().Cancel(s.ctx(), s.addr(j.CallID), frames.CancelDiscard); err != nil {
			s.node.log.Error("broker: discarding job at session end", "session", s.id, "call_id", j.CallID, "err", err)
		}
	}
	s.drainChanges()
	if s.voice != nil {
		s.voice.End()
	}
	s.flushHeld()
	s.releaseHeld() // what is still held goes out before session.ended
	s.stopHeldRetry()
	s.ended = true
	if s.text != nil {
		s.text.ending()
	}
	if s.port != nil {
		s.port.sessionEnded() // its open requests are answered; the facade closes its MCP session
	}
	expired := make(map[string]bool, len(s.expired))
	for id := range s.expired {
		expired[id] = true
	}
	// A slot whose resume window has run out by now counts as expired, even if its own timer
	// had not fired yet (SPEC 10: its token answers resume_expired after the session ended).
	for id, sl := range s.slots {
		if sl.client == nil && !sl.detached.IsZero() && s.now().Sub(sl.detached) >= s.node.cfg.ResumeWindow-50*time.Millisecond {
			expired[id] = true
		}
	}
	info := &endedSession{tenant: s.tenant, joinHash: s.joinHash, callerHash: s.callerHash, expiredSlots: expired, at: time.Now()}
	s.node.recordEnded(s.id, info) // before session.ended: a hello on another node right after it knows
	s.node.ending(s)               // its place in the tenant's quota is free once session.ended is out
	// On the timeline before session.ended goes out: a client that reads it once it has the
	// frame finds the entry.
	s.record(jobs.KindSessionEnd, map[string]any{"reason": string(reason)})
	for _, sl := range s.slots {
		if sl.expiry != nil {
			sl.expiry.Stop()
		}
		if sl.client != nil {
			s.send(sl, &frames.SessionEnded{Reason: reason})
			sl.client.tr.Close(StatusNormal, "session ended")
			s.node.metrics.connections.Dec()
			sl.client = nil
		}
	}
	s.endInfo = info
	s.node.forget(s, info)
	s.dropJournal()
	s.mb.close()
}

// detachAll closes every connection with code and leaves the session to live on in the
// shared store (shutdown with the Redis store: SPEC 18).
func (s *Session) detachAll(code int, reason string) {
	s.stopIdle()
	s.stopHeldRetry()
	if s.voice != nil {
		s.voice.Stop()
	}
	if s.port != nil {
		s.port.detach() // its open requests return; the facade closes its MCP session
	}
	for _, sl := range s.slots {
		if sl.expiry != nil {
			sl.expiry.Stop()
		}
		if sl.client != nil {
			sl.client.tr.Close(code, reason)
			s.node.metrics.connections.Dec()
			sl.client = nil
		}
	}
	s.mb.close()
}

// addr addresses a job of this session by call id.
func (s *Session) addr(callID string) jobs.Addr {
	return jobs.Addr{Tenant: s.tenant, SessionID: s.id, CallID: callID}
}
