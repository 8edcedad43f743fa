package broker

import (
	"maps"
	"slices"
	"time"

	"github.com/backchannel-io/backchannel/broker/textagent"
	"github.com/backchannel-io/backchannel/broker/voice"
	"github.com/backchannel-io/backchannel/jobs"
)

// Reconciling a session taken over from a node that died (SPEC 15). Since no connection sees a
// frame before the journal has it, and the text agent's state is journaled with the frames of
// each event (held.go), the journal tells exactly what the dead node's clients heard: the
// tool_cancels its hosts got, and what its text agent knows of each call. What a job's end still
// owes them is worked out from that and the job's state in the store — never from the time of
// the node's death: a host whose tool_cancel the journal has gets none again, and the text agent
// is told only of the ends its state has not seen (textagent.Agent.Finished ignores the rest).

// crashedJobs lists, for catchUp, the jobs of a session taken over from a dead node whose end
// its clients were not told of, with the state they were last known in: a job cancelled or
// timed out whose tool_cancel the journal lacks, a job the text agent's journaled state has
// running, and a voice job whose completion was not delivered. Every other ended job is
// forgotten.
func (s *Session) crashedJobs(st *parkedState) map[string]jobs.State {
	running := map[string]bool{} // the text agent's running calls, by broker call id
	if st.Text != nil {
		for _, cs := range st.Text.Conversations {
			for _, k := range cs.Calls {
				if k.BrokerID != "" && !k.Finished {
					running[k.BrokerID] = true
				}
			}
		}
	}
	ids := slices.Sorted(maps.Keys(st.CallSeq))
	for id := range running {
		if _, ok := st.CallSeq[id]; !ok {
			ids = append(ids, id)
		}
	}
	was := map[string]jobs.State{}
	for _, id := range ids {
		j, err := s.engine().Reload(s.ctx(), s.addr(id))
		if err != nil || !j.State.Terminal() {
			continue
		}
		cancelled := j.State == jobs.Cancelled || j.State == jobs.TimedOut
		voice := j.ConversationID == "" && j.AgentCallID != "" && voice.AdoptedNotify(j)
		v, shown := st.Voiced[id]
		switch {
		case cancelled && j.DispatchedMS > 0 && !st.Cancelled[id],
			running[id],
			voice && shown && v > 0,
			voice && !shown && j.FinishedMS >= st.Crashed: // it ended too late for the dead node to queue it
			was[id] = jobs.Pending
			if j.DeferredMS > 0 {
				was[id] = jobs.Deferred
			}
		default:
			delete(s.callSeq, id) // it ended, and its clients were told, before the node died
		}
	}
	return was
}

// adoptAgentCalls adds to a journaled text agent's state the open jobs of its conversations
// that the state does not know: the node died in the event that started them, after the job
// was made and before the event's frames and state were journaled. The agent heard nothing of
// them; the calls go on, to the background once BackgroundAfter has passed, as the agent's own.
func adoptAgentCalls(ts *textagent.State, open []*jobs.Job) {
	known := map[string]bool{}
	convs := map[string]int{}
	for i, cs := range ts.Conversations {
		convs[cs.ID] = i
		for _, k := range cs.Calls {
			if k.BrokerID != "" {
				known[k.BrokerID] = true
			}
		}
	}
	for _, j := range open {
		i, ok := convs[j.ConversationID]
		if !ok || j.AgentCallID == "" || known[j.CallID] {
			continue
		}
		cs := &ts.Conversations[i]
		if slices.ContainsFunc(cs.Calls, func(k textagent.CallState) bool { return k.ID == j.AgentCallID }) {
			continue // the agent's id is another call's
		}
		cs.Calls = append(cs.Calls, textagent.CallState{ID: j.AgentCallID, Name: j.Tool.Name, Local: j.Local,
			BrokerID: j.CallID, StartedMS: j.CreatedMS, State: j.State})
	}
}

// reconcileAll has every session the node holds reconcile its jobs with the store: a job change
// relayed by another node may have been lost (the store's connection dropped).
func (n *Node) reconcileAll() { n.eachSession(func(s *Session) { s.post(s.reconcile) }) }

// sweepOverdueAll has every session the node holds look for overdue jobs (sweepOverdue).
func (n *Node) sweepOverdueAll() { n.eachSession(func(s *Session) { s.post(s.sweepOverdue) }) }

// eachSession runs fn for every session the node holds.
func (n *Node) eachSession(fn func(*Session)) {
	n.mu.Lock()
	ss := slices.Collect(maps.Values(n.sessions))
	n.mu.Unlock()
	for _, s := range ss {
		fn(s)
	}
}

// reconcile handles the end of every job the session still takes to be open — its hosts'
// dispatched calls, its text agent's running calls, its voice model's calls — that the store
// shows ended: the change that said so was lost on its way from another node.
func (s *Session) reconcile() {
	if s.ended || s.restoring {
		return // takenBack reads the store itself
	}
	s.reconcileJobs(s.believedOpen(), nil)
}

// overdueGrace is how long past its deadline a job the session takes to be open may stay so
// before sweepOverdue asks the store: a due deadline fires within the engine's poll (100 ms)
// unless its claimer died (ClaimLease, 10 s) — or its change was lost.
const overdueGrace = 3 * time.Second

// overdueSweep is how often every session looks for overdue jobs (sweepOverdue).
const overdueSweep = 2 * time.Second

// sweepOverdue reconciles, of the jobs the session takes to be open, those the engine's cache
// shows past their deadline by overdueGrace, or no longer has: their end — fired by another
// node, whose change a failed publish lost without any subscription dropping — is read from
// the store. A job whose deadline is still to come costs nothing.
func (s *Session) sweepOverdue() {
	if s.ended || s.restoring {
		return
	}
	now := s.node.now().Add(-overdueGrace).UnixMilli()
	believed := s.believedOpen()
	s.reconcileJobs(believed, func(id string) bool {
		j := s.engine().Cached(s.tenant, id)
		return j == nil || (j.DeadlineMS > 0 && j.DeadlineMS < now)
	})
}

// believedOpen lists the jobs the session takes to be open, with the state it knows them in.
func (s *Session) believedOpen() map[string]jobs.State {
	believed := map[string]jobs.State{}
	for id := range s.callSeq {
		believed[id] = jobs.Pending
	}
	if s.text != nil {
		for _, id := range s.text.a.OpenJobs() {
			believed[id] = jobs.Pending
		}
	}
	if s.voice != nil {
		maps.Copy(believed, s.voice.OpenCalls())
	}
	return believed
}

// reconcileJobs handles the end of each job of believed (those check passes; all for nil)
// that the store shows ended.
func (s *Session) reconcileJobs(believed map[string]jobs.State, check func(id string) bool) {
	for _, id := range slices.Sorted(maps.Keys(believed)) {
		if check != nil && !check(id) {
			continue
		}
		j, err := s.engine().Reload(s.ctx(), s.addr(id))
		if err != nil || !j.State.Terminal() {
			continue
		}
		from := believed[id]
		if from == jobs.Pending && j.DeferredMS > 0 {
			from = jobs.Deferred
		}
		s.node.log.Info("broker: a job's end reached its session only through the store", "session", s.id, "call_id", id, "state", j.State)
		s.handleChange(jobs.Change{Event: terminalEvent(j.State), From: from, Job: j})
	}
}
