package sim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Session is one connection to the simulator: one Realtime session with its configuration,
// conversation and responses.
type Session struct {
	srv    *Server
	index  int
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // response goroutines

	// ID is the session id; Header the handshake's request headers; Model the model query
	// parameter.
	ID     string
	Header http.Header
	Model  string

	mu        sync.Mutex
	seq       int
	gone      bool
	cfg       Config
	items     []*Item
	active    *response
	responses []*Response
	vad       vad
	muted     int
	clash     bool
	failNext  string
	stalled   bool
	held      [][]byte
}

func newSession(srv *Server, index int, ws *websocket.Conn, h http.Header, modelName string) *Session {
	ss := &Session{srv: srv, index: index, ws: ws, Header: h, Model: modelName, cfg: defaultConfig()}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	ss.ID = "sess_" + randomID()
	return ss
}

// run serves the connection until it ends.
func (s *Session) run() {
	defer s.wg.Wait()
	defer s.cancel()
	s.mu.Lock()
	s.sendLocked(map[string]any{"type": "session.created", "session": s.sessionObjectLocked()})
	s.mu.Unlock()
	for {
		typ, b, err := s.ws.Read(s.ctx)
		if err != nil {
			break
		}
		if typ != websocket.MessageText {
			continue
		}
		s.handle(b)
	}
	s.mu.Lock()
	s.gone = true
	if r := s.active; r != nil {
		r.end()
		s.active = nil
	}
	s.mu.Unlock()
	_ = s.ws.CloseNow()
}

// handle applies one client event.
func (s *Session) handle(b []byte) {
	var head struct {
		Type    string `json:"type"`
		EventID string `json:"event_id"`
	}
	err := json.Unmarshal(b, &head)
	s.srv.record(Event{Session: s.index, Dir: ClientToServer, Type: head.Type, Raw: append(json.RawMessage(nil), b...)})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errorLocked("", "invalid_request_error", "invalid_json", "The event is not valid JSON: "+err.Error(), "")
		return
	}
	switch head.Type {
	case "session.update":
		s.sessionUpdateLocked(head.EventID, b)
	case "input_audio_buffer.append":
		s.appendLocked(head.EventID, b)
	case "input_audio_buffer.commit":
		s.commitLocked(head.EventID)
	case "input_audio_buffer.clear":
		s.vad.clear()
		s.sendLocked(map[string]any{"type": "input_audio_buffer.cleared"})
	case "conversation.item.create":
		s.itemCreateLocked(head.EventID, b)
	case "conversation.item.delete":
		s.itemDeleteLocked(head.EventID, b)
	case "conversation.item.truncate":
		s.itemTruncateLocked(head.EventID, b)
	case "conversation.item.retrieve":
		s.itemRetrieveLocked(head.EventID, b)
	case "response.create":
		if s.stalled {
			s.held = append(s.held, append([]byte(nil), b...))
			return
		}
		s.responseCreateLocked(head.EventID, b)
	case "response.cancel":
		s.responseCancelLocked(head.EventID, b)
	case "output_audio_buffer.clear":
		s.errorLocked(head.EventID, "invalid_request_error", "unsupported_event", "output_audio_buffer.clear is only supported for WebRTC and SIP connections.", "type")
	default:
		s.errorLocked(head.EventID, "invalid_request_error", "invalid_event", fmt.Sprintf("Invalid value: '%s'. Supported values are the Realtime client events.", head.Type), "type")
	}
}

// sendLocked sends one server event, with a fresh event_id. s.mu is held.
func (s *Session) sendLocked(ev map[string]any) {
	if s.gone {
		return
	}
	s.seq++
	ev["event_id"] = fmt.Sprintf("event_%s%d", s.ID[len(s.ID)-6:], s.seq)
	b, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("sim: encoding %v: %v", ev["type"], err))
	}
	s.srv.record(Event{Session: s.index, Dir: ServerToClient, Type: ev["type"].(string), Raw: b})
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if err := s.ws.Write(ctx, websocket.MessageText, b); err != nil {
		s.gone = true
	}
}

// errorLocked sends an error event answering the client event eventID. s.mu is held.
func (s *Session) errorLocked(eventID, typ, code, message, param string) {
	e := map[string]any{"type": typ, "message": message, "code": nilIfEmpty(code), "param": nilIfEmpty(param), "event_id": nilIfEmpty(eventID)}
	s.sendLocked(map[string]any{"type": "error", "error": e})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// randomID is 16 random characters for ids.
func randomID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// SendError sends an error event of the server's own (not answering a client event).
func (s *Session) SendError(code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorLocked("", "server_error", code, message, "")
}

// Drop closes the connection abruptly, as a network failure would.
func (s *Session) Drop() { _ = s.ws.CloseNow() }

// Disconnect closes the connection the orderly way, with a WebSocket close frame of status
// code (1011 internal error, 1001 going away…) and reason, as a server that ends a session
// does. It returns when the client answered the close (at most 5 seconds).
func (s *Session) Disconnect(code int, reason string) {
	_ = s.ws.Close(websocket.StatusCode(code), reason)
}

// ClashNextResponse makes the next response.create clash: the server starts a response of
// its own (as server VAD would) just before the request arrives, and answers the request with
// conversation_already_has_active_response.
func (s *Session) ClashNextResponse() {
	s.mu.Lock()
	s.clash = true
	s.mu.Unlock()
}

// Stall holds every response.create until Resume: the server is slow to start responses.
func (s *Session) Stall() {
	s.mu.Lock()
	s.stalled = true
	s.mu.Unlock()
}

// Resume handles the held response.create events, in order, and stops holding them.
func (s *Session) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = false
	held := s.held
	s.held = nil
	for _, b := range held {
		var head struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal(b, &head)
		s.responseCreateLocked(head.EventID, b)
	}
}

// StartResponse starts a response of the server's own, as server VAD does at the end of a
// caller turn; it fails while a response is active.
func (s *Session) StartResponse() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		return "", fmt.Errorf("sim: response %s is active", s.active.id)
	}
	return s.startResponseLocked(responseParams{}, true).id, nil
}

// FailNextResponse makes the next response fail (response.done with status failed and the
// error code).
func (s *Session) FailNextResponse(code string) {
	s.mu.Lock()
	s.failNext = code
	s.mu.Unlock()
}
