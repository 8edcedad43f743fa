package faulttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Dir tells what an Event records.
type Dir uint8

// The kinds of Event.
const (
	// Sent is a frame a client wrote to its connection (recorded just before the write, in
	// the order of the writes).
	Sent Dir = iota + 1
	// Recv is a frame a client read from its connection, in the order read.
	Recv
	// Closed is the end of a connection; Raw is a CloseNote in JSON.
	Closed
	// Note is a remark of the harness (a phase, a give-up); Raw is a HarnessNote in JSON.
	Note
)

func (d Dir) String() string {
	switch d {
	case Sent:
		return "sent"
	case Recv:
		return "recv"
	case Closed:
		return "closed"
	case Note:
		return "note"
	}
	return "?"
}

// Event is one entry of a session's history.
type Event struct {
	Conn int       // index into History.Conns; -1 for a note about the whole session
	Dir  Dir       // what happened
	At   time.Time // when the client saw it
	Raw  []byte    // the frame's bytes exactly (Sent, Recv), or a CloseNote / HarnessNote
}

// ConnInfo describes one WebSocket connection of a session.
type ConnInfo struct {
	Role string // host or agent (also in its hello)
	Node string // the base URL it was opened to
}

// CloseNote is the Raw of a Closed event.
type CloseNote struct {
	By     string `json:"by"`               // "client" (the harness closed it) or "server" (read failed)
	Code   int    `json:"code,omitempty"`   // the WebSocket close status, when one was received
	Reason string `json:"reason,omitempty"` // the close reason, when one was received
	Err    string `json:"err,omitempty"`    // the read error otherwise
}

// HarnessNote is the Raw of a Note event.
type HarnessNote struct {
	Note string `json:"note"` // one of the Note* constants
	Role string `json:"role,omitempty"`
	Text string `json:"text,omitempty"`
}

// The notes the harness writes and the checker reads.
const (
	// NoteEndPhase marks the start of a session's end phase: calls sent after it need no
	// outcome (the session is about to end), but their jobs must be discarded at the end.
	NoteEndPhase = "end_phase"
	// NoteGaveUp says a client stopped trying to (re)connect: a liveness failure unless the
	// slot was lost in a way the spec allows.
	NoteGaveUp = "gave_up"
	// NoteSlotLost says a client gave its slot up after a refused resume (the checker decides
	// from the frames whether the spec allowed the refusal).
	NoteSlotLost = "slot_lost"
	// NoteStalled says a request (or a sync barrier) went unanswered for long on a
	// connection the broker kept open; the client then dropped the connection.
	NoteStalled = "stalled"
	// NoteUnresolved lists what the harness still waited for when its quiescence bound ran out.
	NoteUnresolved = "unresolved"
)

// History is everything the clients of one session sent and received, in the order it
// happened (per connection exactly; across connections as the clients saw it).
type History struct {
	Run       string // which run (mode and seed)
	Seed      uint64
	Session   string // the harness's name of the session ("s07")
	SessionID string // the broker's session id
	Conns     []ConnInfo
	Events    []Event
}

// recorder appends to one History; it is safe for concurrent use.
type recorder struct {
	mu    sync.Mutex
	h     History
	start time.Time
}

func newRecorder(run string, seed uint64, session string) *recorder {
	return &recorder{h: History{Run: run, Seed: seed, Session: session}, start: time.Now()}
}

// conn registers a new connection and returns its index.
func (r *recorder) conn(role, node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Conns = append(r.h.Conns, ConnInfo{Role: role, Node: node})
	return len(r.h.Conns) - 1
}

// add appends an event; raw is copied.
func (r *recorder) add(conn int, d Dir, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Events = append(r.h.Events, Event{Conn: conn, Dir: d, At: time.Now(), Raw: append([]byte(nil), raw...)})
}

// note appends a harness note.
func (r *recorder) note(conn int, n HarnessNote) {
	b, _ := json.Marshal(n)
	r.add(conn, Note, b)
}

// closed appends a Closed event.
func (r *recorder) closed(conn int, n CloseNote) {
	b, _ := json.Marshal(n)
	r.add(conn, Closed, b)
}

func (r *recorder) setSessionID(id string) {
	r.mu.Lock()
	r.h.SessionID = id
	r.mu.Unlock()
}

// history returns a copy of the history so far.
func (r *recorder) history() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Conns = append([]ConnInfo(nil), r.h.Conns...)
	h.Events = append([]Event(nil), r.h.Events...)
	return h
}

// Format renders a history one event a line: index, time since the first event, connection
// (role and node), direction and the raw bytes.
func (h History) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s session %s (%s)\n", h.Run, h.Session, h.SessionID)
	for i, e := range h.Events {
		who := "session"
		if e.Conn >= 0 && e.Conn < len(h.Conns) {
			who = fmt.Sprintf("c%d %s@%s", e.Conn, h.Conns[e.Conn].Role, strings.TrimPrefix(h.Conns[e.Conn].Node, "http://"))
		}
		fmt.Fprintf(&b, "#%d +%.3fs %s %s %s\n", i, e.At.Sub(h.Events[0].At).Seconds(), who, e.Dir, e.Raw)
	}
	return b.String()
}
