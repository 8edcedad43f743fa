package broker

import (
	"context"
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
// at the end of the event (flushHeld), together with the text agent's state after the event,
// in one atomic write — so the journal never shows a frame the agent state does not account for,
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
	replace bool // a replacement of the frame under seq (journaled only: the frame under seq is sent)
	durable bool // the journal has it
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

// flushHeld runs after each event: the event's frames and the text agent's state go to the
// journal in one write, then the frames go to their connections. A failed write is retried.
func (s *Session) flushHeld() {
	if !s.holding() || s.ended {
		return
	}
	state, sum := s.agentState()
	pending := s.heldPending()
	if pending == 0 && state == nil {
		s.sendHeld()
		return
	}
	if s.fault(FaultBeforeJournal) {
		return
	}
	if err := s.writeHeld(state); err != nil {
		if state != nil {
			s.agentDirty = true // written with the next attempt
		}
		if errors.Is(err, cluster.ErrLeaseLost) {
			s.node.log.Warn("broker: another node took over a session this node held", "session", s.id)
			s.letGo()
			return
		}
		s.node.log.Error("broker: journaling frames; they wait and are retried", "session", s.id, "frames", pending, "err", err)
		s.retryHeld()
		return
	}
	s.heldRetry = nil
	s.stopHeldRetry()
	if state != nil {
		s.agentSum = sum
	}
	for i := range s.held {
		s.held[i].durable = true
	}
	if s.fault(FaultBeforeSend) {
		return
	}
	s.sendHeld()
}

// The points Config.FaultPoint is called at: an event's frames are in the outboxes and the
// job store has its transitions, but the journal does not have the frames yet; the journal
// has them, but no connection has seen them.
const (
	FaultBeforeJournal = "before_journal"
	FaultBeforeSend    = "before_send"
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

// writeHeld writes the held frames the journal lacks, and state, in one AppendFrames (the
// session's record first, if it could not be written before).
func (s *Session) writeHeld(state []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx(), journalTimeout)
	defer cancel()
	if !s.journaled.Load() {
		if err := s.saveJournal(); err != nil {
			return err
		}
	}
	w := cluster.JournalWrite{AgentState: state, Max: s.node.cfg.Limits.OutboxFrames}
	for _, h := range s.held {
		if !h.durable {
			w.Frames = append(w.Frames, cluster.JournalFrameWrite{Slot: h.sl.id, Seq: h.seq, Data: h.data, Replace: h.replace})
		}
	}
	err := s.node.journal.AppendFrames(ctx, s.node.addr, s.tenant, s.id, w)
	s.node.journalWrote(err)
	return err
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
// agent timer, a job change of the agent's) is exported.
func (s *Session) agentState() ([]byte, uint64) {
	if s.text == nil || !s.agentDirty {
		return nil, 0
	}
	s.agentDirty = false
	data, err := json.Marshal(s.text.a.Export())
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
