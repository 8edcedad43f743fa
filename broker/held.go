package broker

import (
	"encoding/json"
	"errors"
	"hash/maphash"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/cluster"
)

// Journal before send (SPEC 15: "journaled before any connection sees it"). On a store that
// journals (cluster.Journal), a frame that enters an outbox is held: no connection sees it
// until the journal has it. The frames an event of the session puts in its outboxes are written
// after the event (flushHeld; off the session's loop, one write in flight, the frames of the
// events handled meanwhile in the next), together with the text agent's state, in one atomic
// write — so the journal never shows a frame the agent state does not account for,
// nor the reverse — and only then sent. A write that fails (Redis unreachable) keeps the frames
// held and is retried with backoff; later frames queue behind them, in order. A frame its
// transition already journaled (jobs.FrameOut: a tool_call, a defer's ack) waits only for the
// held frames before it.
//
// So whatever a client saw, a node that takes the session over has, and a client never holds a
// seq the journal lacks; a crash loses only frames nobody saw, which the taker makes again from
// the jobs' state (reconcile.go).

// heldFrame is a frame in an outbox that no connection has seen yet.
type heldFrame struct {
	sl      *Slot
	seq     int64
	data    []byte
	replace bool      // a replacement of the frame under seq (journaled only: the frame under seq is sent)
	durable bool      // the journal has it
	writing bool      // the write in flight carries it
	audio   bool      // agent audio for the caller: never journaled, sent in its turn
	due     time.Time // the audio's due time (its delay is measured from it)
}

// holding reports whether frames wait for the journal before they are sent: on a cluster that
// outlives the node (cluster.Cluster.Durable), until the session ends. It is the one place the
// broker asks what its cluster guarantees: a session that does not hold writes nothing to the
// journal (saveJournal), so it has no lease to renew, nothing to take over and no frame for a
// transition to journal (frameOut), and its frames go out at once — a node alone, on the
// memory store, pays for no journal at all.
func (s *Session) holding() bool { return s.node.store.Durable() && !s.unheld }

// hold keeps a frame just pushed to sl's outbox until the journal has it (durable: it has).
func (s *Session) hold(sl *Slot, seq int64, data []byte, durable bool) {
	s.held = append(s.held, heldFrame{sl: sl, seq: seq, data: data, durable: durable})
	if durable && s.heldPending() == 0 {
		s.sendHeld() // nothing before it waits: it goes at once
	}
}

// holdAudio sends agent audio to the caller's slot sl: at once, or after the frames before it
// that wait for the journal.
func (s *Session) holdAudio(sl *Slot, chunk []byte, due time.Time) {
	if s.heldPending() == 0 {
		s.writeAudio(sl.client, chunk, due)
		return
	}
	s.held = append(s.held, heldFrame{sl: sl, data: chunk, durable: true, audio: true, due: due})
}

// dropHeldAudio drops the agent audio waiting behind frames the journal does not have yet (the
// caller barged in: it is not played late).
func (s *Session) dropHeldAudio() {
	kept := s.held[:0]
	for _, h := range s.held {
		if !h.audio {
			kept = append(kept, h)
		}
	}
	clear(s.held[len(kept):])
	s.held = kept
}

// holdReplacement journals data in place of the frame under seq of sl's outbox (already
// replaced there).
func (s *Session) holdReplacement(sl *Slot, seq int64, data []byte) {
	if s.holding() {
		s.held = append(s.held, heldFrame{sl: sl, seq: seq, data: data, replace: true})
	}
}

// heldPending counts the held frames the journal does not have yet.
func (s *Session) heldPending() int {
	n := 0
	for _, h := range s.held {
		if !h.durable {
			n++
		}
	}
	return n
}

// heldFrom is the seq of sl's first frame the journal does not have yet (0: none).
func (s *Session) heldFrom(sl *Slot) int64 {
	for _, h := range s.held {
		if h.sl == sl && !h.durable && !h.replace {
			return h.seq
		}
	}
	return 0
}

// flushHeld runs after each event: the frames held since the last write and the text agent's
// state go to the journal in one write, then the frames go to their connections. The write
// runs off the session's loop, one at a time: while it is in flight the loop goes on with the
// next events, whose frames stay held and go, all together, in the write after it (so a busy
// session writes once per round trip, not once per event, and an event never waits for the
// journal). A failed write is retried.
func (s *Session) flushHeld() {
	if s.heldSkip {
		s.heldSkip = false // the failed write's own event: the next one, or the retry, tries again
		return
	}
	if !s.holding() || s.ended || s.writing != nil {
		return
	}
	state, sum := s.agentState()
	pending := s.heldPending()
	if pending == 0 && state == nil && len(s.settledPending) == 0 && !s.settledReset {
		s.sendHeld()
		return
	}
	if s.fault(FaultBeforeJournal) {
		return
	}
	if !s.journaled.Load() {
		if err := s.saveJournal(); err != nil {
			s.heldFailed(state, err)
			return
		}
	}
	w := &heldWrite{state: state, sum: sum, settled: len(s.settledPending), settledGen: s.settledGen, done: make(chan struct{})}
	jw := cluster.JournalWrite{AgentState: state, Max: s.node.cfg.Limits.OutboxFrames,
		AgentSettled: s.settledPending[:w.settled:w.settled], AgentSettledReset: s.settledReset}
	for i := range s.held {
		if h := &s.held[i]; !h.durable {
			h.writing = true
			jw.Frames = append(jw.Frames, cluster.JournalFrameWrite{Slot: h.sl.id, Seq: h.seq, Data: h.data, Replace: h.replace})
		}
	}
	s.writing = w
	n, tenant, id := s.node, s.tenant, s.id
	go func() {
		// The node's own context, not one with journalTimeout (see there).
		w.err = n.journal.AppendFrames(n.ctx, n.addr, tenant, id, jw)
		n.journalWrote(w.err)
		close(w.done)
		s.post(func() { s.heldWritten(w) })
	}()
}

// heldWrite is a journal write of held frames in flight (flushHeld).
type heldWrite struct {
	state      []byte // the agent state written, nil when none
	sum        uint64 // its hash
	settled    int    // how many of settledPending it writes
	settledGen int    // settledGen when it was made
	done       chan struct{}
	err        error // set before done is closed
	handled    bool
}

// heldWritten takes the answer of write w on the session's loop: the frames it carried are
// durable and go out (the mailbox's after then writes what queued behind it); a failure keeps
// them held for a retry.
func (s *Session) heldWritten(w *heldWrite) {
	if w.handled || s.writing != w {
		return // handled already (finishHeld), or the session let go of its frames since
	}
	w.handled = true
	s.writing = nil
	if s.ended || !s.holding() {
		return // ending: releaseHeld sent every frame
	}
	if w.err != nil {
		for i := range s.held {
			s.held[i].writing = false
		}
		s.heldSkip = true
		s.heldFailed(w.state, w.err)
		return
	}
	s.heldRetry = nil
	s.stopHeldRetry()
	if w.state != nil {
		s.agentSum = w.sum
	}
	if w.settledGen == s.settledGen { // else a reset since: all of them go again
		s.settledPending, s.settledReset = s.settledPending[w.settled:], false
	}
	for i := range s.held {
		if h := &s.held[i]; h.writing {
			h.writing, h.durable = false, true
		}
	}
	if s.fault(FaultBeforeSend) {
		return
	}
	s.sendHeld()
}

// heldFailed handles a journal write that failed: the agent state goes with the next attempt,
// a lost lease lets the session go, any other error is retried with backoff.
func (s *Session) heldFailed(state []byte, err error) {
	if state != nil {
		s.agentDirty = true // written with the next attempt
	}
	if errors.Is(err, cluster.ErrLeaseLost) {
		s.node.log.Warn("broker: another node took over a session this node held", "session", s.id)
		s.letGo()
		return
	}
	if s.node.ctx.Err() != nil {
		return // the node stops: nothing more is written
	}
	s.node.log.Error("broker: journaling frames; they wait and are retried", "session", s.id, "frames", s.heldPending(), "err", err)
	s.retryHeld()
}

// finishHeld waits, on the session's loop, for the journal write in flight and then for one
// of everything held: for the rare step that must see its frames sent before it goes on (a
// connection closed right after its last answers).
func (s *Session) finishHeld() {
	s.awaitHeldWrite()
	s.flushHeld()
	s.awaitHeldWrite()
}

// awaitHeldWrite waits for the journal write in flight, if any, and takes its answer.
func (s *Session) awaitHeldWrite() {
	if w := s.writing; w != nil {
		<-w.done
		s.heldWritten(w)
	}
}

// The points Config.FaultPoint is called at: an event's frames are in the outboxes and the
// job store has its transitions, but the journal does not have the frames yet; the journal
// has them, but no connection has seen them; the journal has a slot's new resume token, but
// the welcome carrying it is not written.
const (
	FaultBeforeJournal = "before_journal"
	FaultBeforeSend    = "before_send"
	FaultBeforeWelcome = "before_welcome"
)

// fault calls the Config.FaultPoint hook at point and reports whether the node was stopped
// meanwhile (the session then does nothing more).
func (s *Session) fault(point string) bool {
	if f := s.node.cfg.FaultPoint; f != nil {
		f(point)
		return s.node.ctx.Err() != nil
	}
	return false
}

// sendHeld sends, in order, the held frames the journal has, up to the first it lacks, to
// their slots' connections; what a connection has seen already (a resume's replay) is not sent
// again.
func (s *Session) sendHeld() {
	n := 0
	for _, h := range s.held {
		if !h.durable {
			break
		}
		n++
		sl := h.sl
		if h.audio {
			if sl.client != nil && s.slots[sl.id] == sl {
				s.writeAudio(sl.client, h.data, h.due)
			}
			continue
		}
		if h.replace || sl.client == nil || s.slots[sl.id] != sl || h.seq <= sl.sent {
			continue
		}
		data := h.data
		if i := sl.out.index(h.seq); i >= 0 {
			data = sl.out.frames[i].data // replaced since (a tool_cancel in place of its tool_call)
		}
		sl.client.tr.Send(data)
		sl.sent = h.seq
	}
	clear(s.held[:n])
	s.held = append(s.held[:0], s.held[n:]...)
}

// releaseHeld sends every held frame, journaled or not, and stops holding: the session ends,
// and its journal goes with it.
func (s *Session) releaseHeld() {
	s.unheld = true
	for i := range s.held {
		s.held[i].durable = true
	}
	s.sendHeld()
}

// retryHeld arranges another attempt at the held frames' journaling.
func (s *Session) retryHeld() {
	if s.heldRetry == nil {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, 2*time.Second, 0
		s.heldRetry = b
	}
	s.stopHeldRetry()
	s.heldTimer = s.after(s.heldRetry.NextBackOff(), func() {}) // the event's end flushes
}

// stopHeldRetry stops a pending retry of the journal write (the session ends or leaves).
func (s *Session) stopHeldRetry() {
	if s.heldTimer != nil {
		s.heldTimer.Stop()
		s.heldTimer = nil
	}
}

// agentState is the text agent's state (a WebSocket agent's, or the conversation of MCP
// clients) when it changed since it was last journaled
// (nil otherwise), and its hash. Only an event that marked it (agentDirty: an agent frame, an
// agent timer, a job change of the agent's) is exported. The calls that settled meanwhile go
// to settledPending: the journal keeps them apart, each written once, so that what an event
// writes does not grow with the session's history.
func (s *Session) agentState() ([]byte, uint64) {
	if s.text == nil || !s.agentDirty {
		return nil, 0
	}
	s.agentDirty = false
	st, settled, reset := s.text.a.ExportJournal()
	if reset {
		s.settledPending, s.settledReset = nil, true
		s.settledGen++
	}
	for _, sc := range settled {
		if b, err := json.Marshal(sc); err == nil {
			s.settledPending = append(s.settledPending, b)
		}
	}
	data, err := json.Marshal(st)
	if err != nil {
		return nil, 0
	}
	sum := maphash.Bytes(agentSeed, data)
	if sum == s.agentSum {
		return nil, 0
	}
	return data, sum
}

// agentSeed seeds the hashes that tell whether a text agent's state changed.
var agentSeed = maphash.MakeSeed()
