package textagent

import (
	"slices"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// State is what a text agent's session carries to another broker node (SPEC 15: the node that
// takes a session over rebuilds it with its result queues and conversations): the
// conversations with their calls, queued prompts, unconsumed results and blocked waits, and the
// open interactions. It is plain data (JSON).
type State struct {
	Seq           int                 `json:"seq"`
	Conversations []ConversationState `json:"conversations"`
	Interactions  []InteractionState  `json:"interactions,omitempty"`
	// Settled are the calls nothing can change any more (see SettledCall), in the order they
	// settled; the conversations' Calls hold the others.
	Settled []SettledCall `json:"settled,omitempty"`
}

// SettledCall is a call of a conversation that is over for good: it finished, its result was
// given (or it never had one to give), and nothing waits on it. It is kept only so that its id
// is not used again and a later `wait` or `cancel` naming it gets its answer (SPEC 13). As it
// never changes, the journal writes it once (ExportJournal), not with every state after it: a
// long session's state stays the size of what is still going on.
type SettledCall struct {
	Conversation string `json:"conversation"`
	CallState
}

// ConversationState is one conversation of a State, parents before children.
type ConversationState struct {
	ID            string        `json:"id"`
	Parent        string        `json:"parent,omitempty"`
	ParentCall    string        `json:"parent_call,omitempty"` // the parent conversation's call it stands for
	Cancelled     bool          `json:"cancelled,omitempty"`
	InTurn        bool          `json:"in_turn,omitempty"`
	Queue         []PromptState `json:"queue,omitempty"`
	Calls         []CallState   `json:"calls,omitempty"`
	Done          []string      `json:"done,omitempty"` // unconsumed background results, in completion order
	Bare          string        `json:"bare,omitempty"` // the blocked bare wait
	Timed         string        `json:"timed,omitempty"`
	TimedUntilMS  int64         `json:"timed_until_ms,omitempty"`
	Status        StatusState   `json:"status,omitempty"`
	ReminderArmed bool          `json:"reminder_armed,omitempty"`
	Timeouts      int           `json:"timeouts,omitempty"`
	AdviceGiven   bool          `json:"advice_given,omitempty"`
}

// CallState is one call of a conversation.
type CallState struct {
	ID              string        `json:"id"`
	Name            string        `json:"name"`
	Builtin         bool          `json:"builtin,omitempty"`
	Local           bool          `json:"local,omitempty"`
	BrokerID        string        `json:"broker_id,omitempty"`
	StartedMS       int64         `json:"started_ms"`
	Background      bool          `json:"background,omitempty"`
	Task            bool          `json:"task,omitempty"`
	Finished        bool          `json:"finished,omitempty"`
	CancelRequested bool          `json:"cancel_requested,omitempty"`
	CancelReason    string        `json:"cancel_reason,omitempty"`
	Outcome         *ContentState `json:"outcome,omitempty"`
	State           jobs.State    `json:"state,omitempty"`
	Consumed        bool          `json:"consumed,omitempty"`
	WaitsFor        string        `json:"waits_for,omitempty"` // an exact wait: the call it waits for
}

// PromptState is a prompt not delivered yet.
type PromptState struct {
	ID         string `json:"id"`
	Text       string `json:"text"`
	Internal   bool   `json:"internal,omitempty"`
	Activating bool   `json:"activating,omitempty"`
	Of         string `json:"of,omitempty"` // the call whose completion it announces
}

// ContentState is a result's content.
type ContentState struct {
	Headers map[string]string `json:"headers,omitempty"`
	Body    *string           `json:"body,omitempty"`
}

// InteractionState is an interaction open on one of the agent's calls.
type InteractionState struct {
	ID           string   `json:"id"`
	Conversation string   `json:"conversation"`
	Call         string   `json:"call"`
	Options      []string `json:"options,omitempty"`
}

// Export returns the agent's state, the same bytes for the same state (calls and interactions
// in id order, settled calls in the order they settled), so an unchanged state is not journaled
// again. The agent is left as it is (its timers still run).
func (a *Agent) Export() State {
	st := a.exportLive()
	st.Settled = slices.Clone(a.settled)
	return st
}

// ExportJournal is Export for a journal that keeps the settled calls apart: the state without
// them, and the calls settled since the last ExportJournal. When reset is set, settled is every
// settled call and takes the place of those given before (a settled call changed: see
// resettle).
func (a *Agent) ExportJournal() (st State, settled []SettledCall, reset bool) {
	st = a.exportLive()
	if a.settledReset {
		a.settledReset = false
		a.journaledSettled = len(a.settled)
		return st, slices.Clone(a.settled), true
	}
	settled = slices.Clone(a.settled[a.journaledSettled:])
	a.journaledSettled = len(a.settled)
	return st, settled, false
}

// exportLive returns the state of everything but the settled calls, settling first the calls
// that are over (they leave their conversations' Calls for a.settled, in id order).
func (a *Agent) exportLive() State {
	st := State{Seq: a.seq}
	if len(a.order) > 0 {
		st.Conversations = make([]ConversationState, 0, len(a.order))
	}
	for _, c := range a.order {
		cs := ConversationState{ID: c.id, Cancelled: c.cancelled, InTurn: c.inTurn, Status: c.status,
			ReminderArmed: c.reminderArmed, Timeouts: c.timeouts, AdviceGiven: c.adviceGiven}
		if c.parent != nil {
			cs.Parent = c.parent.id
		}
		if c.parentCall != nil {
			cs.ParentCall = c.parentCall.id
		}
		for _, p := range c.queue {
			ps := PromptState{ID: p.id, Text: p.text, Internal: p.internal, Activating: p.activating}
			if p.of != nil {
				ps.Of = p.of.id
			}
			cs.Queue = append(cs.Queue, ps)
		}
		live := a.exportScratch[:0]
		for _, k := range c.unsettled {
			live = append(live, k)
		}
		slices.SortFunc(live, func(x, y *call) int { return strings.Compare(x.id, y.id) })
		if len(live) > 0 {
			cs.Calls = make([]CallState, 0, len(live))
		}
		for _, k := range live {
			if a.settles(k) {
				delete(c.unsettled, k.id)
				k.settled = true
				a.settled = append(a.settled, SettledCall{Conversation: c.id, CallState: exportCall(k)})
				continue
			}
			cs.Calls = append(cs.Calls, exportCall(k))
		}
		clear(live)
		a.exportScratch = live
		for _, d := range c.done {
			cs.Done = append(cs.Done, d.id)
		}
		if c.bare != nil {
			cs.Bare = c.bare.id
		}
		if c.timed != nil {
			cs.Timed = c.timed.k.id
			cs.TimedUntilMS = c.timed.until.UnixMilli()
		}
		st.Conversations = append(st.Conversations, cs)
	}
	for id, o := range a.open {
		st.Interactions = append(st.Interactions, InteractionState{ID: id, Conversation: o.k.conv.id, Call: o.k.id, Options: o.options})
	}
	slices.SortFunc(st.Interactions, func(a, b InteractionState) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// exportCall is one call's CallState.
func exportCall(k *call) CallState {
	ks := CallState{ID: k.id, Name: k.name, Builtin: k.builtin, Local: k.local, BrokerID: k.brokerID,
		StartedMS: k.started.UnixMilli(), Background: k.background, Task: k.task, Finished: k.finished,
		CancelRequested: k.cancelRequested, CancelReason: string(k.cancelReason), State: k.state, Consumed: k.consumed}
	if k.outcome != nil && !k.consumed { // a consumed result is never given again
		ks.Outcome = exportContent(*k.outcome)
	}
	if k.wait != nil && k.wait.target != nil {
		ks.WaitsFor = k.wait.target.id
	}
	return ks
}

// settles reports whether a call is over for good (SettledCall): finished and consumed, with
// no wait of its own or on it, no prompt, timer or open interaction.
func (a *Agent) settles(k *call) bool {
	if !k.finished || !k.consumed || k.waiter != nil || k.wait != nil || k.prompt != nil || k.stop != nil {
		return false
	}
	c := k.conv
	if c.bare == k || (c.timed != nil && c.timed.k == k) || slices.Contains(c.done, k) {
		return false
	}
	for _, o := range a.open {
		if o.k == k {
			return false
		}
	}
	return true
}

// resettle records that a settled call changed (a cancel sent again after a takeover, see
// cancelCall): the settled calls are exported again, all of them.
func (a *Agent) resettle(k *call) {
	if !k.settled {
		return
	}
	for i := range a.settled {
		if a.settled[i].Conversation == k.conv.id && a.settled[i].ID == k.id {
			a.settled[i].CallState = exportCall(k)
		}
	}
	a.settledReset = true
}

func exportContent(c Content) *ContentState {
	cs := &ContentState{}
	for i, name := range headerOrder {
		if c.set[i] {
			if cs.Headers == nil {
				cs.Headers = map[string]string{}
			}
			cs.Headers[name] = c.values[i]
		}
	}
	if body, ok := c.Body(); ok {
		cs.Body = &body
	}
	return cs
}

// importCall is the call of conversation c a CallState describes (its waits are linked after).
func importCall(c *conversation, ks CallState) *call {
	k := &call{conv: c, id: ks.ID, name: ks.Name, builtin: ks.Builtin, local: ks.Local, brokerID: ks.BrokerID,
		started: time.UnixMilli(ks.StartedMS), background: ks.Background, task: ks.Task, finished: ks.Finished,
		cancelRequested: ks.CancelRequested, cancelReason: frames.CancelReason(ks.CancelReason), state: ks.State, consumed: ks.Consumed}
	if ks.Outcome != nil {
		o := importContent(ks.Outcome)
		k.outcome = &o
	}
	return k
}

func importContent(cs *ContentState) Content {
	var c Content
	for _, name := range headerOrder {
		if v, ok := cs.Headers[name]; ok {
			c.Set(name, v)
		}
	}
	if cs.Body != nil {
		c.SetBody(*cs.Body)
	}
	return c
}

// Restore returns the agent of a session taken over from another node (see State). Its clocks
// go on from where they stood: a running call that had not gone to the background yet goes
// there when its BackgroundAfter has passed since it started, a timed wait returns at its
// deadline.
func Restore(env Env, opts Options, st State) *Agent {
	a := New(env, opts)
	a.seq = st.Seq
	a.convs = make(map[string]*conversation, len(st.Conversations))
	a.order = nil
	calls := map[string]map[string]*call{} // conversation → call id → call
	settledOf := map[string][]CallState{}  // conversation → its settled calls
	for _, sc := range st.Settled {
		settledOf[sc.Conversation] = append(settledOf[sc.Conversation], sc.CallState)
	}
	for _, cs := range st.Conversations {
		parent := a.convs[cs.Parent]
		var pc *call
		if parent != nil {
			pc = calls[parent.id][cs.ParentCall]
		}
		c := newConversation(cs.ID, parent, pc)
		c.cancelled, c.inTurn, c.status = cs.Cancelled, cs.InTurn, cs.Status
		c.reminderArmed, c.timeouts, c.adviceGiven = cs.ReminderArmed, cs.Timeouts, cs.AdviceGiven
		a.convs[c.id] = c
		a.order = append(a.order, c)
		byID := map[string]*call{}
		calls[c.id] = byID
		for _, ks := range settledOf[c.id] {
			k := importCall(c, ks)
			k.settled = true
			c.calls[k.id] = k
			byID[k.id] = k
		}
		for _, ks := range cs.Calls {
			k := importCall(c, ks)
			c.add(k)
			byID[k.id] = k
			if k.brokerID != "" && !k.finished {
				a.jobs[k.brokerID] = k
			}
		}
		for _, ks := range cs.Calls {
			if ks.WaitsFor == "" {
				continue
			}
			w, t := byID[ks.ID], byID[ks.WaitsFor]
			if t == nil {
				continue
			}
			w.wait = &waitRequest{mode: WaitModeExact, target: t}
			t.waiter = w
			c.exact[w] = true
		}
		for _, ps := range cs.Queue {
			p := &prompt{id: ps.ID, text: ps.Text, internal: ps.Internal, activating: ps.Activating, of: byID[ps.Of]}
			if p.of != nil {
				p.of.prompt = p
			}
			c.queue = append(c.queue, p)
		}
		for _, id := range cs.Done {
			if k := byID[id]; k != nil {
				c.done = append(c.done, k)
			}
		}
		if w := byID[cs.Bare]; w != nil {
			w.wait = &waitRequest{mode: WaitModeAnyBackground}
			c.bare = w
		}
		if w := byID[cs.Timed]; w != nil {
			a.armTimed(w, time.UnixMilli(cs.TimedUntilMS).Sub(a.env.Now()))
		}
	}
	if a.convs[RootConversation] == nil { // never: every session has its root
		root := newConversation(RootConversation, nil, nil)
		a.convs[RootConversation] = root
		a.order = append([]*conversation{root}, a.order...)
	}
	// The journal the state came from may not have the settled calls (a parked session's
	// state comes from its parking, and its journal was dropped): the next ExportJournal gives
	// them all.
	a.settled = slices.Clone(st.Settled)
	a.settledReset = len(a.settled) > 0
	for _, is := range st.Interactions {
		if k := calls[is.Conversation][is.Call]; k != nil {
			a.open[is.ID] = &openInteraction{k: k, options: is.Options}
		}
	}
	for _, k := range a.jobs {
		if !k.background {
			k := k
			k.stop = a.env.After(max(a.opts.BackgroundAfter-a.env.Now().Sub(k.started), 0), func() { a.toBackground(k) })
		}
	}
	return a
}
