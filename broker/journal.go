package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// Journaling (SPEC 15: killing a node loses no job; its sessions resume on another node). On a
// cluster that outlives the node (cluster.Cluster.Durable: Redis), a node keeps what only it
// holds of each session in the store all the time, not only when it shuts down (park.go): the
// session's record — slots, declared tools, resume-token hashes, join-token hash — whenever it
// changes, before the welcome or the reply that makes the change known; and every frame of every
// outbox before any connection sees it, so that no client ever holds a seq the journal lacks.
// The node holds each session under a lease of Config.HoldTTL that it renews with its holds.
//
// When a node dies its leases run out. The next node that hears of one of its sessions — a
// hello naming it, an HTTP request about it, or its own sweep for orphaned sessions every
// second — takes it over, exactly once, and rebuilds it from the journal as it rebuilds a parked
// session: its slots' resume windows run from the node's last renewal, resume replays the
// journaled outbox after last_seq, and the jobs that ended after that renewal (a deadline fired
// by another node, a cancel through another node) are caught up with. A node that finds at a
// renewal that a session's lease is no longer its own (it hung longer than the lease) lets the
// session go: its connections are closed with 1012 and their clients resume on the new holder.
//
// A WebSocket text agent's state — conversations, calls, result queues, waits — is journaled
// with the frames of each event that changed it (held.go), so a wait blocked on the dead node is
// answered on the new one. What the journal does not keep: an MCP client's conversation (it is the
// go-sdk session's: the client initializes again), and completions queued for narration but not
// yet voiced (a voice job that ended after the node's last renewal is voiced by the new node,
// as for a parked session).

// journalTimeout bounds a session record's write to the journal, a takeover and the other
// journal calls that happen once per session or per node loop. The writes of held frames
// (held.go, several per job lifecycle) take the node's context alone: the store bounds them
// (Redis: the client's socket timeouts), and a timer each was garbage on the hot path.
const journalTimeout = 5 * time.Second

// saveJournal writes the session's record to the journal and takes (or keeps) its lease. A
// write that fails leaves the session unjournaled, to be written again before its next frames
// (held.go); what the record makes known (a welcome's resume token) must wait for it.
func (s *Session) saveJournal() error {
	if !s.holding() || s.ended {
		return nil // the cluster does not outlive the node (held.go), or the session ended
	}
	st := s.snapshot(time.Now(), false)
	data, err := json.Marshal(st)
	if err == nil {
		// Expired slots too: their outboxes are deleted with the session's journal.
		slots := make([]string, 0, len(st.Slots)+len(st.Expired))
		for _, ps := range st.Slots {
			slots = append(slots, ps.ID)
		}
		slots = append(slots, st.Expired...)
		ctx, cancel := context.WithTimeout(s.ctx(), journalTimeout)
		defer cancel()
		err = s.node.journal.SaveSession(ctx, s.node.addr, s.tenant, s.id, data, slots, s.node.cfg.HoldTTL)
		s.node.journalWrote(err)
	}
	if err != nil {
		s.journaled.Store(false)
		if errors.Is(err, cluster.ErrLeaseLost) {
			s.node.log.Warn("broker: another node took over a session this node held", "session", s.id)
			s.post(s.letGo)
		} else {
			s.node.log.Error("broker: journaling a session", "session", s.id, "err", err)
		}
		return err
	}
	s.journaled.Store(true)
	return nil
}

// dropJournal deletes the session's journal: it ended, or it was parked.
func (s *Session) dropJournal() {
	if !s.journaled.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx(), journalTimeout)
	defer cancel()
	if err := s.node.journal.DropSession(ctx, s.node.addr, s.tenant, s.id); err != nil {
		s.node.log.Warn("broker: dropping a session's journal", "session", s.id, "err", err)
	}
}

// renewLeases renews the node's leases on its journaled sessions, one call per tenant, and lets
// go of the sessions whose lease another node took.
func (n *Node) renewLeases(ctx context.Context) {
	byTenant := map[string][]string{}
	n.mu.Lock()
	for id, s := range n.sessions {
		if s.journaled.Load() {
			byTenant[s.tenant] = append(byTenant[s.tenant], id)
		}
	}
	n.mu.Unlock()
	for tenant, ids := range byTenant {
		lost, err := n.journal.RenewLeases(ctx, n.addr, tenant, ids, n.cfg.HoldTTL)
		n.journalWrote(err)
		if err != nil {
			n.log.Warn("broker: renewing the node's leases", "tenant", tenant, "sessions", len(ids), "err", err)
			continue
		}
		for _, id := range lost {
			if s := n.session(id); s != nil && s.journaled.Load() {
				n.log.Warn("broker: another node took over a session this node held", "session", id)
				s.post(func() { s.letGo() })
			}
		}
	}
}

// letGo gives up a session another node took over: its connections are closed with 1012 (their
// clients resume on the new holder) and the node forgets it, without ending it.
func (s *Session) letGo() {
	if s.ended {
		return
	}
	s.journaled.Store(false)
	s.held = nil // nobody saw them; the new holder makes them again from the jobs (reconcile.go)
	s.writing = nil
	s.detachAll(StatusServiceRestart, "session moved to another node")
	n := s.node
	n.mu.Lock()
	n.dropSessionLocked(s)
	n.mu.Unlock()
}

// sweepOrphans takes over the journaled sessions of the node's tenants whose lease ran out
// (their node died): their clocks go on here, and their clients find them on this node.
func (n *Node) sweepOrphans() {
	for _, tenant := range n.cfg.tenants() {
		ids, err := n.journal.Orphaned(n.ctx, tenant, time.Now())
		if err != nil {
			n.log.Warn("broker: listing orphaned sessions", "tenant", tenant, "err", err)
			continue
		}
		for _, id := range ids {
			n.claim(tenant, id)
		}
	}
}

// takeOver takes a journaled session whose node died and returns it as a parked session, or
// nil (held: another node's lease still runs, or the journal could not be read).
func (n *Node) takeOver(tenant, id string) (p *cluster.ParkedSession, st *parkedState, held bool) {
	if e := n.endedInfo(id); e != nil {
		n.dropEnded(e, id)
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(n.ctx, journalTimeout)
	defer cancel()
	js, err := n.journal.TakeOver(ctx, n.addr, tenant, id, n.cfg.HoldTTL)
	if err != nil {
		if errors.Is(err, cluster.ErrLeaseHeld) {
			return nil, nil, true
		}
		if errors.Is(err, jobs.ErrNotFound) {
			return nil, nil, false
		}
		n.log.Error("broker: taking over a session", "session", id, "err", err)
		return nil, nil, true
	}
	st = &parkedState{}
	if err := json.Unmarshal(js.Record, st); err != nil {
		n.log.Error("broker: decoding a journaled session", "session", id, "err", err)
		return nil, nil, false
	}
	// The node is taken to have died at its last renewal, a third of the lease before it ran
	// out at the latest: the slots' resume windows run from then.
	died := time.UnixMilli(js.LeaseEndMS).Add(-n.cfg.HoldTTL)
	if died.After(time.Now()) || js.LeaseEndMS == 0 {
		died = time.Now()
	}
	st.CallSeq = map[string]parkedCallOut{}
	st.Cancelled = map[string]bool{}
	st.Voiced = map[string]int{}
	for i := range st.Slots {
		ps := &st.Slots[i]
		ps.DetachedMS = died.UnixMilli()
		for _, f := range js.Outboxes[ps.ID] {
			ps.Frames = append(ps.Frames, parkedFrame{Seq: f.Seq, Data: string(f.Data)})
			switch jf := jobFrame(f.Data); jf.Type {
			case typeToolCall:
				st.CallSeq[jf.CallID] = parkedCallOut{Slot: ps.ID, Seq: f.Seq}
			case typeToolCancel:
				st.Cancelled[jf.CallID] = true
			case typeNarration:
				if jf.Kind != string(frames.NarrationCompletion) || st.Voiced[jf.CallID] < 0 {
					break
				}
				switch frames.NarrationState(jf.State) {
				case frames.NarrationQueued:
					st.Voiced[jf.CallID] = jf.Attempt
				case frames.NarrationDelivered, frames.NarrationSkipped, frames.NarrationStopped:
					st.Voiced[jf.CallID] = -1
				default: // speaking when the node died, or failed: that attempt is spent
					st.Voiced[jf.CallID] = jf.Attempt + 1
				}
			case typeDeliveryFailed:
				st.Voiced[jf.CallID] = -1
			}
		}
		if n := len(ps.Frames); n > 0 {
			ps.Next = ps.Frames[n-1].Seq + 1
			ps.Sent = ps.Frames[n-1].Seq // a client may have seen every journaled frame
		} else {
			ps.Next, ps.Sent = 1, 0
		}
	}
	if len(js.AgentState) > 0 && st.TextAgent {
		var ts textagent.State
		if err := json.Unmarshal(js.AgentState, &ts); err != nil {
			n.log.Error("broker: decoding a journaled text agent's state", "session", id, "err", err)
		} else {
			for _, b := range js.AgentSettled {
				var sc textagent.SettledCall
				if err := json.Unmarshal(b, &sc); err != nil {
					n.log.Error("broker: decoding a journaled text agent's settled call", "session", id, "err", err)
					continue
				}
				ts.Settled = append(ts.Settled, sc)
			}
			if open, err := n.engine.OpenJobs(ctx, js.Tenant, id); err == nil {
				adoptAgentCalls(&ts, open)
			} else {
				n.log.Error("broker: listing the open jobs of a session taken over", "session", id, "err", err)
			}
			st.Text = &ts
		}
	}
	st.Crashed = died.UnixMilli()
	return &cluster.ParkedSession{Tenant: js.Tenant, SessionID: js.SessionID}, st, false
}

// dropEnded drops the journal of session id, which ended (e): if it outlived the session (its
// node could not drop it), it is never revived.
func (n *Node) dropEnded(e *endedSession, id string) {
	ctx, cancel := context.WithTimeout(n.ctx, journalTimeout)
	defer cancel()
	if err := n.journal.DropSession(ctx, "", e.tenant, id); err != nil {
		n.log.Warn("broker: dropping an ended session's journal", "session", id, "err", err)
	}
}

// redispatch sends again, for a session taken over from a dead node, the tool_call of each
// pending job whose tool_call the journal does not have: the node died between the job's
// transition and the frame's journaling, and since a frame goes out only once journaled, no host
// has seen it.
func (s *Session) redispatch(open []*jobs.Job) {
	for _, j := range open {
		if j.Local || j.State != jobs.Pending || j.Slot == "" {
			continue
		}
		if _, ok := s.callSeq[j.CallID]; ok {
			continue
		}
		sl := s.slots[j.Slot]
		if sl == nil || sl.tools[j.Tool.Name] == nil {
			continue
		}
		s.dispatch(sl, sl.tools[j.Tool.Name], j)
	}
}

// holderAlive reports whether a live node holds session id (false when the store cannot tell).
func (n *Node) holderAlive(id string) bool {
	ctx, cancel := context.WithTimeout(n.ctx, relayTimeout)
	defer cancel()
	holder, _, err := n.dir.SessionHolder(ctx, id)
	if err != nil || holder == "" {
		return false
	}
	alive, err := n.dir.NodesAlive(ctx, []string{holder})
	return err == nil && alive[holder]
}

// frameOut prepares slot sl's next frame to be appended to the journal by the transition that
// causes it (jobs.FrameOut: the tool_call of a new job, the ack of a defer), or returns nil when
// the session is not journaled or earlier frames of the slot are not yet. render encodes the frame, seq included, from the operation's
// outcome. Nothing may enter the slot's outbox between this and sendOut.
func (s *Session) frameOut(sl *Slot, render func(seq int64, outcome any) []byte) *jobs.FrameOut {
	if !s.journaled.Load() || s.heldFrom(sl) != 0 {
		// Not while frames of the slot wait for the journal (held.go): an outbox stream takes
		// its seqs in order, so this one goes with them, at the event's end.
		return nil
	}
	seq := sl.out.next
	return &jobs.FrameOut{Slot: sl.id, Seq: seq, Max: s.node.cfg.Limits.OutboxFrames,
		Render: func(o any) []byte { return render(seq, o) }}
}

// sendOut sends f to slot sl: as its transition journaled it (fo applied), or like any frame.
func (s *Session) sendOut(sl *Slot, fo *jobs.FrameOut, f frames.Frame) int64 {
	if fo == nil || !fo.Applied || len(fo.Data) == 0 {
		return s.send(sl, f)
	}
	if sl.out.next != fo.Seq {
		s.node.log.Error("broker: a frame journaled with its transition lost its seq", "session", s.id, "slot", sl.id,
			"seq", fo.Seq, "next", sl.out.next)
		return s.send(sl, f)
	}
	return s.put(sl, f, func(int64) []byte { return fo.Data }, false)
}

// journaledJobFrame is what a takeover reads of a journaled frame about a job.
type journaledJobFrame struct {
	Type    string `json:"type"`
	CallID  string `json:"call_id"`
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
}

// The frames a takeover reads (jobFrame), and how their encoding starts (frames.Encode puts
// the type first).
var (
	typeToolCall       = frames.ToolCall{}.FrameType()
	typeToolCancel     = frames.ToolCancel{}.FrameType()
	typeNarration      = frames.ToolJobNarration{}.FrameType()
	typeDeliveryFailed = frames.ToolJobDeliveryFailed{}.FrameType()
	jobFramePrefixes   = [][]byte{typePrefix(typeToolCall), typePrefix(typeToolCancel), typePrefix(typeNarration), typePrefix(typeDeliveryFailed)}
)

func typePrefix(typ string) []byte { return []byte(`{"type":"` + typ + `"`) }

// jobFrame decodes a journaled tool_call, tool_cancel, tool_job_narration or
// tool_job_delivery_failed frame (Type "" for any other frame).
func jobFrame(data []byte) journaledJobFrame {
	var f journaledJobFrame
	for _, p := range jobFramePrefixes {
		if bytes.HasPrefix(data, p) {
			_ = json.Unmarshal(data, &f)
			return f
		}
	}
	return f
}
