// Package sim is an in-process simulator of the OpenAI Realtime server (GA protocol) for
// tests: a real WebSocket server on loopback that answers like the service does.
//
// It checks the bearer key and the model query parameter, keeps the session configuration
// (session.created / session.updated), a conversation of items, and one active response in
// the default conversation (a second response.create gets the error
// conversation_already_has_active_response). Caller audio (G.711 µ-law only) drives an energy
// VAD: speech_started when 20 ms frames get loud, speech_stopped after the configured silence,
// then a commit, a user audio item and — since the simulator cannot recognize speech — a
// transcription with the text a test registered with Server.Transcribe; with
// turn_detection.create_response the server answers the turn on its own (a burst nobody
// registered words for is noise, and is not answered), and speech during a response cancels
// it (interrupt_response).
//
// What a response says is deterministic. For a caller turn (a response the server starts, or
// one whose metadata backchannel_kind is turn or clarify) whose latest item other than a system
// message is a user message, that message is read by the grammar of the scripted model: `call TOOL {json}` makes a function call, `cancel REF`
// calls cancel_job, `say TEXT` says TEXT, `mute N` makes the next N spoken responses silent.
// Otherwise the response says the Go-quoted sentence of the instructions' last line
// `Say something like: "…"`, else `I heard: TEXT` for a user message, `NAME returned: OUTPUT`
// (or `NAME failed: ERROR` for an output {"error": ERROR}) after a function output, else
// `OK.`. Speech is a 440 Hz tone of WordMS per word (at least 300 ms), sent as
// response.output_audio.delta chunks with transcript deltas, ChunkDelay apart, so a response
// stays active for a while and can be cancelled (response.cancel) or truncated. A function
// call comes at once, in one burst of events.
//
// Faults for tests: Session.Drop (a network failure) and Session.Disconnect (a close frame)
// end a connection, Server.Refuse answers new connections with an HTTP error, and
// Server.RejectItems refuses client items of a type; Session.ClashNextResponse, Stall /
// Resume and FailNextResponse disturb responses.
//
// Every event in both directions is recorded (Server.Events) so that tests can check them
// against the published event schemas.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Options configure a Server. The zero value of a field means its documented default.
type Options struct {
	// APIKey, when set, is the bearer key a connection must present (else HTTP 401).
	APIKey string
	// ChunkDelay is the pause before each audio delta of a response (default 2 ms).
	ChunkDelay time.Duration
	// WordMS is how long the simulated voice speaks a word (default 60).
	WordMS int
	// Unrecorded turns off the record of events (Events, Count) for a long-running simulator.
	Unrecorded bool
}

// MinSpeechMS is the shortest speech of a response.
const MinSpeechMS = 300

// Direction says who sent an event.
type Direction int

// The directions of events.
const (
	ClientToServer Direction = iota
	ServerToClient
)

// String names the direction.
func (d Direction) String() string {
	if d == ClientToServer {
		return "client→server"
	}
	return "server→client"
}

// Event is one event as it went over the wire.
type Event struct {
	Session int // index of the session, from 0
	Dir     Direction
	Type    string
	Raw     json.RawMessage
}

// Server is a running simulator.
type Server struct {
	opts Options
	hs   *httptest.Server

	mu          sync.Mutex
	sessions    []*Session
	events      []Event
	transcripts []string
	changed     chan struct{} // closed and replaced when a session connects
	refuse      int           // the HTTP status new connections get (0: accepted)
	closing     bool          // Close began: no new session is admitted
	rejected    map[string]bool
}

// New starts a simulator on a loopback port; Close stops it.
func New(opts Options) *Server {
	s := newServer(opts)
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Listen starts a simulator on addr (HOST:PORT; port 0 picks one), for running it standalone
// (`backchannel simulate-realtime`); Close stops it.
func Listen(addr string, opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := newServer(opts)
	s.hs = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	_ = s.hs.Listener.Close()
	s.hs.Listener = ln
	s.hs.Start()
	return s, nil
}

func newServer(opts Options) *Server {
	if opts.ChunkDelay <= 0 {
		opts.ChunkDelay = 2 * time.Millisecond
	}
	if opts.WordMS <= 0 {
		opts.WordMS = 60
	}
	return &Server{opts: opts, changed: make(chan struct{})}
}

// URL is the Realtime endpoint of the simulator (ws://127.0.0.1:PORT/v1/realtime).
func (s *Server) URL() string {
	return "ws" + strings.TrimPrefix(s.hs.URL, "http") + "/v1/realtime"
}

// Close drops every connection and stops the server; clients that dial again are refused.
// It may be called more than once.
func (s *Server) Close() {
	s.mu.Lock()
	s.closing = true
	sessions := append([]*Session(nil), s.sessions...)
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.Drop()
	}
	s.hs.Close()
}

// Transcribe registers what the next bursts of caller speech say, in order: the simulator
// cannot recognize speech, so each committed turn is transcribed with the next text (an
// empty transcript when none is registered).
func (s *Server) Transcribe(texts ...string) {
	s.mu.Lock()
	s.transcripts = append(s.transcripts, texts...)
	s.mu.Unlock()
}

func (s *Server) nextTranscript() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.transcripts) == 0 {
		return ""
	}
	t := s.transcripts[0]
	s.transcripts = s.transcripts[1:]
	return t
}

// Refuse makes the server answer new connections with the HTTP status (a 503 while it is
// overloaded, say), until Refuse(0). Connected sessions go on.
func (s *Server) Refuse(status int) {
	s.mu.Lock()
	s.refuse = status
	s.mu.Unlock()
}

func (s *Server) refusing() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return http.StatusServiceUnavailable
	}
	return s.refuse
}

// RejectItems makes conversation.item.create of items of type typ (function_call, say) fail
// with invalid_value in every session, as a server that does not accept them from clients
// would.
func (s *Server) RejectItems(typ string) {
	s.mu.Lock()
	if s.rejected == nil {
		s.rejected = make(map[string]bool)
	}
	s.rejected[typ] = true
	s.mu.Unlock()
}

func (s *Server) rejects(typ string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected[typ]
}

// Sessions are the sessions so far, in the order they connected.
func (s *Server) Sessions() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Session(nil), s.sessions...)
}

// Session waits for the i-th session (from 0) to connect.
func (s *Server) Session(ctx context.Context, i int) (*Session, error) {
	for {
		s.mu.Lock()
		if i < len(s.sessions) {
			ss := s.sessions[i]
			s.mu.Unlock()
			return ss, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sim: session %d did not connect: %w", i, ctx.Err())
		case <-ch:
		}
	}
}

// Events are all events so far, both ways, in the order they were sent or received.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Count is how many events of type typ went in direction dir.
func (s *Server) Count(dir Direction, typ string) int {
	n := 0
	for _, e := range s.Events() {
		if e.Dir == dir && e.Type == typ {
			n++
		}
	}
	return n
}

func (s *Server) record(e Event) {
	if s.opts.Unrecorded {
		return
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// serve accepts one Realtime connection: GET /v1/realtime?model=M with the bearer key.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/realtime" {
		httpError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.URL.Path)
		return
	}
	if s.opts.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		httpError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if status := s.refusing(); status != 0 {
		httpError(w, status, "refused", "The server refuses new connections for now.")
		return
	}
	modelName := r.URL.Query().Get("model")
	if modelName == "" {
		httpError(w, http.StatusBadRequest, "missing_model", "The model query parameter is required.")
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(16 << 20)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ws.CloseNow()
		return
	}
	ss := newSession(s, len(s.sessions), ws, r.Header.Clone(), modelName)
	s.sessions = append(s.sessions, ss)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	ss.run()
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": code, "message": msg}})
}
