package openai

import (
	"strings"
	"time"
)

// Caller turns reach the model two ways. Spoken turns are heard by the model itself: server
// VAD commits the caller's audio as a user item, and — while auto-respond is on — the server
// answers it on its own. Their transcripts go to the broker, which passes the turns it does
// not consume back with CallerTurn. Typed turns (caller.text) exist only as CallerTurn.
// The adapter tells the two apart by remembering the transcripts of recent spoken turns: a
// CallerTurn that matches one adds no second user item, and asks for a response only when
// the server did not already answer the audio.

// heardWindow is how long a spoken turn's transcript waits to be passed back.
const heardWindow = 10 * time.Second

// maxHeard bounds the spoken turns remembered.
const maxHeard = 32

// heardTurn is a caller turn the model heard as audio.
type heardTurn struct {
	itemID      string
	answered    bool // auto-respond was on when it was committed: the server answers it
	text        string
	transcribed time.Time // zero until its transcript arrived
}

// heardTurns are the recent spoken turns, oldest first. Guarded by Model.mu.
type heardTurns struct{ turns []*heardTurn }

// committed remembers a committed audio item.
func (h *heardTurns) committed(itemID string, answered bool) {
	if len(h.turns) >= maxHeard {
		h.turns = h.turns[1:]
	}
	h.turns = append(h.turns, &heardTurn{itemID: itemID, answered: answered})
}

// transcribed records a spoken turn's transcript.
func (h *heardTurns) transcribed(itemID, text string, now time.Time) {
	for _, t := range h.turns {
		if t.itemID == itemID {
			t.text, t.transcribed = text, now
			return
		}
	}
}

// forget drops a turn whose transcription failed.
func (h *heardTurns) forget(itemID string) {
	for i, t := range h.turns {
		if t.itemID == itemID {
			h.turns = append(h.turns[:i:i], h.turns[i+1:]...)
			return
		}
	}
}

// take finds the spoken turn whose transcript is text; it and every older turn are dropped
// (those were consumed by the broker).
func (h *heardTurns) take(text string, now time.Time) (*heardTurn, bool) {
	want := normalize(text)
	for i, t := range h.turns {
		if t.transcribed.IsZero() || now.Sub(t.transcribed) > heardWindow || normalize(t.text) != want {
			continue
		}
		h.turns = h.turns[i+1:]
		return t, true
	}
	return nil, false
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// CallerTurn implements model.Model: a typed turn becomes a user message and a response (the
// message is added right before the response is requested, behind any active response, so
// that each turn is followed by its own answer); a spoken turn the model heard gets a response
// only if the server did not answer it already.
// With clarify, the response asks the caller to choose one of those options. A turn given
// while the adapter reconnects waits for the new connection, and is then a typed turn (the
// new session never heard the caller's audio).
func (m *Model) CallerTurn(text string, clarify []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable() {
		return
	}
	if m.c == nil {
		m.deferLocked("caller turn", func() { m.callerTurnLocked(text, clarify) })
		return
	}
	m.callerTurnLocked(text, clarify)
}

// callerTurnLocked passes a caller turn on the current connection. m.mu is held.
func (m *Model) callerTurnLocked(text string, clarify []string) {
	heard, ok := m.turns.take(text, time.Now())
	if ok && heard.answered {
		// The model answers the audio it heard on its own (and sees the open question).
		return
	}
	q := &request{}
	if !ok {
		// A typed turn (or one the model never heard): a user message, added to the
		// conversation right before its response is requested.
		q.turn = &messageItem{ID: m.nextID("bc_turn_"), Type: itemTypeMessage, Role: roleUser,
			Content: []contentPart{{Type: contentTypeInputText, Text: text}}}
	}
	kind := KindTurn
	if len(clarify) > 0 {
		kind = KindClarify
		q.params.Instructions = clarifyInstructions(m.instructions, clarify)
	}
	m.enqueueLocked(q, kind, nil)
}
