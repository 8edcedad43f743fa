package broker

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/broker/voice"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
)

// Parking. A node that shuts down with a store shared by several nodes closes its connections
// with 1012 and leaves its sessions to live on (SPEC 18). It writes what only it held of each
// session — slots with their tools, resume-token hashes, outboxes and seq counters, the join
// token's hash, completions not yet voiced — to the store (cluster.Parking), and the next
// node that hears of the session takes it back, exactly once: a hello naming it (a resume
// above all, SPEC 10: resume works on any node that shares the store), its timeline, or the end
// of its resume window, found by any node's sweep. Jobs, handles, deadlines and timelines were
// in the store all along.

// parkedState is a session's encoding in cluster.ParkedSession.State.
type parkedState struct {
	JoinHash    []byte                   `json:"join_hash"`
	CallerHash  []byte                   `json:"caller_hash,omitempty"`
	CreatedMS   int64                    `json:"created_ms"`
	Model       ModelConfig              `json:"model"`
	Orders      int                      `json:"orders"`
	Expired     []string                 `json:"expired,omitempty"`
	Slots       []parkedSlot             `json:"slots"`
	CallSeq     map[string]parkedCallOut `json:"call_seq,omitempty"`
	Completions []voice.Completion       `json:"completions,omitempty"`
	TextAgent   bool                     `json:"text_agent,omitempty"`
	// Text is the text agent's state (conversations, result queues, waits).
	Text *textagent.State `json:"text,omitempty"`
	// Open are the session's open jobs and their states when it was parked: one that ended
	// while nobody held the session is caught up with when it is taken back.
	Open map[string]jobs.State `json:"open,omitempty"`
	// Crashed is, for a session taken over from the journal of a node that died, when the node
	// is taken to have died (epoch ms); 0 for a parked session.
	Crashed int64 `json:"-"`
	// Cancelled are, for a session taken over from a journal, the call ids whose tool_cancel
	// the journal has.
	Cancelled map[string]bool `json:"-"`
	// Voiced is, for a session taken over from a journal, what the journal shows of each voice
	// job's completion: the attempt it is to be voiced as next (a queued one's, or the one after
	// an attempt that was being spoken or failed), or -1 once it was delivered (or is done).
	Voiced map[string]int `json:"-"`
}

// parkedCallOut is where a job's tool_call went (callOut).
type parkedCallOut struct {
	Slot string `json:"slot"`
	Seq  int64  `json:"seq"`
}

// parkedSlot is a slot of a parked session.
type parkedSlot struct {
	ID         string            `json:"id"`
	Role       frames.Role       `json:"role"`
	Order      int               `json:"order"`
	Declared   bool              `json:"declared,omitempty"`
	Tools      []frames.ToolDecl `json:"tools,omitempty"`
	TokenHash  []byte            `json:"token_hash"`
	PrevHash   []byte            `json:"prev_token_hash,omitempty"` // a token still valid too (Slot.prevOK)
	Next       int64             `json:"next"`
	Sent       int64             `json:"sent"`
	Frames     []parkedFrame     `json:"frames,omitempty"`
	DetachedMS int64             `json:"detached_ms"`
	// ByCaller: the slot was attached with the caller token (it may act only as a caller).
	ByCaller bool `json:"by_caller,omitempty"`
}

// parkedFrame is a frame in a parked outbox, seq included.
type parkedFrame struct {
	Seq  int64  `json:"seq"`
	Data string `json:"data"`
}

// snapshot encodes the session's node-only state: with frames, everything a parked session
// needs (outboxes, the text agent's state, open jobs, completions); without, the record the
// journal keeps (journal.go), whose outboxes are journaled frame by frame.
func (s *Session) snapshot(now time.Time, full bool) parkedState {
	st := parkedState{JoinHash: s.joinHash[:], CallerHash: s.callerHash[:], CreatedMS: s.created.UnixMilli(), Model: s.modelCfg, Orders: s.orders,
		TextAgent: s.text != nil}
	if full && s.voice != nil {
		// First: a completion being spoken fails here, and its host's frame enters the outbox.
		st.Completions = s.voice.Park()
	}
	for id := range s.expired {
		st.Expired = append(st.Expired, id)
	}
	slices.Sort(st.Expired)
	for _, sl := range s.slots {
		ps := parkedSlot{ID: sl.id, Role: sl.role, Order: sl.order, Declared: sl.declared, TokenHash: sl.tokenHash[:],
			PrevHash: prevHashOf(sl),
			Next:     sl.out.next, Sent: sl.sent, DetachedMS: now.UnixMilli(), ByCaller: sl.byCaller}
		if sl.client == nil && !sl.detached.IsZero() {
			ps.DetachedMS = sl.detached.UnixMilli()
		}
		for _, t := range sl.tools {
			ps.Tools = append(ps.Tools, t.Decl)
		}
		slices.SortFunc(ps.Tools, func(a, b frames.ToolDecl) int { return strings.Compare(a.Name, b.Name) })
		if full {
			for _, f := range sl.out.frames {
				ps.Frames = append(ps.Frames, parkedFrame{Seq: f.seq, Data: string(f.data)})
			}
		}
		st.Slots = append(st.Slots, ps)
	}
	slices.SortFunc(st.Slots, func(a, b parkedSlot) int { return a.Order - b.Order })
	if !full {
		return st
	}
	st.CallSeq = make(map[string]parkedCallOut, len(s.callSeq))
	if s.text != nil {
		ts := s.text.a.Export()
		st.Text = &ts
	}
	for id, co := range s.callSeq {
		st.CallSeq[id] = parkedCallOut{Slot: co.slot, Seq: co.seq}
	}
	if open, err := s.engine().OpenJobs(s.ctx(), s.tenant, s.id); err == nil {
		st.Open = make(map[string]jobs.State, len(open))
		for _, j := range open {
			st.Open[j.CallID] = j.State
		}
	}
	return st
}

// park writes the session's state for another node and closes its connections with 1012
// (SPEC 18). It runs on the session's loop, as its last event on this node.
func (s *Session) park() {
	now := time.Now()
	st := s.snapshot(now, true)
	s.detachAll(StatusServiceRestart, "service restart")
	data, err := json.Marshal(st)
	if err == nil {
		err = s.node.parking.ParkSession(s.ctx(), cluster.ParkedSession{Tenant: s.tenant, SessionID: s.id,
			ExpiresMS: now.Add(s.node.cfg.ResumeWindow).UnixMilli(), State: data}, s.engine().Retention())
	}
	if err != nil {
		s.node.log.Error("broker: parking a session for another node", "session", s.id, "err", err)
		return
	}
	s.dropJournal()
	if err := s.node.dir.ReleaseSession(s.ctx(), s.node.addr, s.id); err != nil {
		s.node.log.Warn("broker: releasing a parked session", "session", s.id, "err", err)
	}
	s.node.log.Info("broker: session parked for another node", "session", s.id, "slots", len(st.Slots))
}

// claim takes a session no live node holds and makes it live on this node: a parked one, or
// one journaled by a node that died (journal.go). It returns nil when the store holds neither of
// that id (tenant may be "": unknown), or another node holds it, and reports whether the client
// should try again later: another node's lease on the session still runs (its node may have
// died: then the session is free once the lease runs out), or the store could not be read (the
// session may well exist). Entry points call it through takeBack (locate.go), the sweeps
// directly.
func (n *Node) claim(tenant, id string) (*Session, bool) {
	n.takeMu.Lock() // two hellos for one parked session: the second finds the first's session
	defer n.takeMu.Unlock()
	if s := n.session(id); s != nil {
		return s, false
	}
	n.mu.Lock()
	closing := n.closing
	n.mu.Unlock()
	if closing {
		return nil, false
	}
	var st *parkedState
	p, err := n.parking.TakeParked(n.ctx, tenant, id)
	switch {
	case err == nil:
		st = &parkedState{}
		if err := json.Unmarshal(p.State, st); err != nil {
			n.log.Error("broker: decoding a parked session", "session", id, "err", err)
			return nil, false
		}
		// The parking node's journal may outlive its park (it drops it after parking): this
		// node journals the session afresh, its outboxes from the parked state's seqs.
		ctx, cancel := context.WithTimeout(n.ctx, journalTimeout)
		if err := n.journal.DropSession(ctx, "", p.Tenant, id); err != nil {
			n.log.Warn("broker: dropping the journal of a parked session", "session", id, "err", err)
		}
		cancel()
	case errors.Is(err, jobs.ErrNotFound):
		var held bool
		if p, st, held = n.takeOver(tenant, id); p == nil {
			return nil, held
		}
	default:
		n.log.Error("broker: taking back a parked session", "session", id, "err", err)
		return nil, true
	}
	s := n.restore(p, st)
	n.mu.Lock()
	n.addSessionLocked(s) // taken back even past the tenant's limit: it was open already
	n.mu.Unlock()
	n.hold(s)
	s.mb.post(func() { s.takenBack(st) }, false)
	if st.Crashed != 0 {
		n.log.Info("broker: took over a session whose node died", "session", id, "slots", len(st.Slots))
	} else {
		n.log.Info("broker: took back a parked session", "session", id, "slots", len(st.Slots))
	}
	return s, false
}

// restore rebuilds a parked session's structure; takenBack then starts its clocks.
func (n *Node) restore(p *cluster.ParkedSession, st *parkedState) *Session {
	s := sessionOf(n, p.SessionID, p.Tenant, time.UnixMilli(st.CreatedMS))
	s.modelCfg, s.orders = st.Model, st.Orders
	copy(s.joinHash[:], st.JoinHash)
	copy(s.callerHash[:], st.CallerHash)
	for _, id := range st.Expired {
		s.expired[id] = true
	}
	for id, co := range st.CallSeq {
		s.callSeq[id] = callOut{slot: co.Slot, seq: co.Seq}
	}
	lim := n.cfg.Limits
	for _, ps := range st.Slots {
		sl := &Slot{id: ps.ID, role: ps.Role, order: ps.Order, declared: ps.Declared, sent: ps.Sent, byCaller: ps.ByCaller,
			detached: time.UnixMilli(ps.DetachedMS), out: newOutbox(lim.OutboxFrames, lim.OutboxBytes)}
		copy(sl.tokenHash[:], ps.TokenHash)
		if len(ps.PrevHash) == len(sl.prevHash) {
			copy(sl.prevHash[:], ps.PrevHash)
			sl.prevOK = true
		}
		if len(ps.Tools) > 0 {
			tools, _, e := compileTools(ps.Tools)
			if e != nil {
				n.log.Error("broker: a parked slot's tools no longer compile", "session", s.id, "slot", sl.id, "err", e.Message)
			}
			sl.tools = tools
		}
		sl.out.next = ps.Next
		for _, f := range ps.Frames {
			sl.out.frames = append(sl.out.frames, outFrame{seq: f.Seq, data: []byte(f.Data)})
			sl.out.bytes += len(f.Data)
		}
		s.slots[sl.id] = sl
		switch sl.role {
		case frames.RoleCaller:
			s.caller = sl
		case frames.RoleAgent:
			s.agent = sl
			s.text = newTextAgent(s, sl)
			if st.Text != nil {
				s.text.a = textagent.Restore(s.text, s.text.options(), *st.Text)
			}
		}
	}
	if s.text == nil && st.TextAgent && st.Text != nil {
		s.text = s.portText(*st.Text) // the conversation of MCP clients (SPEC 14)
	}
	s.parked = st.Completions
	s.adopt, s.restoring = true, true
	return s
}

// takenBack starts a taken-back session's clocks where the parked ones stood: each slot's resume
// window from when its connection dropped, and the session's from the latest drop (SPEC 10).
func (s *Session) takenBack(st *parkedState) {
	s.saveJournal() // this node's lease, before anything is sent
	window := s.node.cfg.ResumeWindow
	open, err := s.engine().OpenJobs(s.ctx(), s.tenant, s.id)
	if err != nil {
		s.node.log.Error("broker: listing the open jobs of a taken-back session", "session", s.id, "err", err)
	}
	s.openJobs = len(open)
	was := st.Open
	if st.Crashed != 0 {
		s.takenOverMS = s.now().UnixMilli()
		was = s.crashedJobs(st)
		s.cancelSent = st.Cancelled // their tool_cancel is in the journal: it is not sent again
	}
	s.catchUp(was, open, st.Voiced)
	s.restoring = false // cancelSent stays: a later reconcile may meet those jobs again
	if st.Crashed != 0 {
		s.redispatch(open)
	}
	var last time.Time
	for _, sl := range s.slots {
		sl := sl
		if sl.detached.After(last) {
			last = sl.detached
		}
		sl.expiry = s.after(max(window-s.now().Sub(sl.detached), 0), func() { s.expireSlot(sl) })
	}
	if last.IsZero() {
		last = s.created
	}
	s.armIdleAfter(max(window-s.now().Sub(last), 0))
	detail := map[string]any{"text": "session taken back by this node", "slots": len(st.Slots)}
	if st.Crashed != 0 {
		detail["text"] = "session taken over by this node: the node that held it stopped answering"
	}
	if st.TextAgent && st.Text == nil {
		// An MCP client's conversation is its MCP session's, which ended with the node.
		detail["text_agent"] = "restarted"
	}
	s.record(jobs.KindNotice, detail)
}

// catchUp runs what the end of a job causes for the jobs that ended while no node held the
// session (a deadline, or a cancel through another node): the host's tool_cancel — in place of
// a tool_call still undelivered in its outbox — the text agent's side, and the completion of a
// voice job, voiced once the caller is back. voiced is what a journal shows of the voice jobs'
// completions (parkedState.Voiced; nil for a parked session): one delivered is not voiced
// again, one that was being spoken is voiced as its next attempt.
func (s *Session) catchUp(was map[string]jobs.State, open []*jobs.Job, voiced map[string]int) {
	still := make(map[string]bool, len(open))
	for _, j := range open {
		still[j.CallID] = true
	}
	for _, id := range slices.Sorted(maps.Keys(was)) {
		if still[id] {
			continue
		}
		j, err := s.engine().Reload(s.ctx(), s.addr(id)) // this node may have seen it open, long ago
		if err != nil || !j.State.Terminal() {
			continue
		}
		s.openJobs++ // handleChange counts it closed
		s.handleChange(jobs.Change{Event: terminalEvent(j.State), From: was[id], Job: j})
		if j.ConversationID == "" && !j.Local && j.AgentCallID != "" && voice.AdoptedNotify(j) {
			attempt := 1
			if n, ok := voiced[j.CallID]; ok {
				attempt = n // one in flight counted as a failed attempt (SPEC 15)
				if n < 1 || n > narration.MaxCompletionAttempts {
					continue // delivered, or its attempts are spent
				}
			}
			if voice.Voiced(j.State) {
				s.parked = append(s.parked, voice.Completion{CallID: j.CallID, Handle: j.Handle, Slot: j.Slot, Attempt: attempt,
					Request: voice.CompletionRequest(voice.AdoptedLabel(j), j.Tool.Name, j)})
			}
		}
	}
}

// terminalEvent is the change event of a transition to the terminal state st.
func terminalEvent(st jobs.State) jobs.Event {
	switch st {
	case jobs.Completed:
		return jobs.EventCompleted
	case jobs.Failed:
		return jobs.EventFailed
	case jobs.TimedOut:
		return jobs.EventTimedOut
	case jobs.Declined:
		return jobs.EventDeclined
	}
	return jobs.EventCancelled
}

// parkedSweep is how often a node looks for parked sessions whose resume window ran out.
const parkedSweep = time.Second

// sweepParked ends the parked sessions of the node's tenants whose resume window ran out with
// nobody back (SPEC 10: resume_expired, their jobs cancelled with reason discard), whichever
// node finds them first.
func (n *Node) sweepParked() {
	for _, tenant := range n.cfg.tenants() {
		ids, err := n.parking.DueParked(n.ctx, tenant, time.Now())
		if err != nil {
			n.log.Warn("broker: listing parked sessions", "tenant", tenant, "err", err)
			continue
		}
		for _, id := range ids {
			if s, _ := n.claim(tenant, id); s != nil {
				s.post(func() {
					if !s.attached() {
						s.end(endResumeExpired)
					}
				})
			}
		}
	}
}

// prevHashOf is what a parked or journaled slot keeps of its previous token: its hash while it
// is still valid on this node (Slot.prevOK) or its client may lack the welcome that replaced it
// (Slot.prevKept), else nothing.
func prevHashOf(sl *Slot) []byte {
	if !sl.prevOK && !sl.prevKept {
		return nil
	}
	return sl.prevHash[:]
}
