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
// in id order), so an unchanged state is not journaled again. The agent is left as it is (its
// timers still run).
func (a *Agent) Export() State {
	st := State{Seq: a.seq}
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
		for _, k := range c.calls {
			ks := CallState{ID: k.id, Name: k.name, Builtin: k.builtin, Local: k.local, BrokerID: k.brokerID,
				StartedMS: k.started.UnixMilli(), Background: k.background, Task: k.task, Finished: k.finished,
				CancelRequested: k.cancelRequested, CancelReason: string(k.cancelReason), State: k.state, Consumed: k.consumed}
			if k.outcome != nil && !k.consumed { // a consumed result is never given again
				ks.Outcome = exportContent(*k.outcome)
			}
			if k.wait != nil && k.wait.target != nil {
				ks.WaitsFor = k.wait.target.id
			}
			cs.Calls = append(cs.Calls, ks)
		}
		slices.SortFunc(cs.Calls, func(a, b CallState) int { return strings.Compare(a.ID, b.ID) })
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
		for _, ks := range cs.Calls {
			k := &call{conv: c, id: ks.ID, name: ks.Name, builtin: ks.Builtin, local: ks.Local, brokerID: ks.BrokerID,
				started: time.UnixMilli(ks.StartedMS), background: ks.Background, task: ks.Task, finished: ks.Finished,
				cancelRequested: ks.CancelRequested, cancelReason: frames.CancelReason(ks.CancelReason), state: ks.State, consumed: ks.Consumed}
			if ks.Outcome != nil {
				o := importContent(ks.Outcome)
				k.outcome = &o
			}
			c.calls[k.id] = k
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
