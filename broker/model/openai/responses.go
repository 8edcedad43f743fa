package openai

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
)

// One response at a time in the default conversation: every response.create the adapter
// wants to send waits in one queue and is sent only when no response is active and none is
// being created. A response the server starts on its own (server VAD) can still clash with a
// request sent at the same moment; the server then answers the request with
// conversation_already_has_active_response and the request is sent again after that
// response ends.

// Metadata keys the adapter puts on every response it requests.
const (
	// MetaRequest is the metadata key holding the adapter's id of the request.
	MetaRequest = "backchannel_request"
	// MetaKind is the metadata key holding what the response is for: a model.Kind, or
	// KindTurn, KindClarify, KindToolResult.
	MetaKind = "backchannel_kind"
	// MetaLabel and MetaName hold a requested response's job label and tool name.
	MetaLabel = "backchannel_label"
	MetaName  = "backchannel_name"
)

// Kinds of responses the adapter requests besides the model.Kind narrations (MetaKind).
const (
	// KindTurn answers a caller turn.
	KindTurn = "turn"
	// KindClarify answers a caller turn that did not match the open interaction's options.
	KindClarify = "clarify"
	// KindToolResult speaks about a tool result.
	KindToolResult = "tool_result"
)

// maxCreateAttempts bounds how often one request is sent again after a clash.
const maxCreateAttempts = 5

// retryPause is how long a clashing request waits when the server's active response has not
// been seen yet (times the attempt).
const retryPause = 50 * time.Millisecond

// maxMetadata is the Realtime limit of metadata pairs, keys and values.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// ErrRespondTimeout is returned by Respond when its response was not created in time.
var ErrRespondTimeout = errors.New("openai: the response was not created in time")

// request is one response.create the adapter wants to send.
type request struct {
	tag       string // MetaRequest
	params    responseParams
	turn      *messageItem // a typed caller turn, added right before the first response.create
	eventID   string       // the event id of the response.create sent last
	attempts  int
	ready     chan struct{} // closed when id or err is set; nil when nobody waits
	id        string
	err       error
	abandoned bool // its Respond gave up: once created it is cancelled and kept silent
}

// finish settles the request for its waiter.
func (r *request) finish(id string, err error) {
	r.id, r.err = id, err
	if r.ready != nil {
		select {
		case <-r.ready:
		default:
			close(r.ready)
		}
	}
}

// responder is the response queue. Its fields are guarded by Model.mu.
type responder struct {
	queue    []*request
	creating *request        // sent, waiting for response.created (or an error)
	active   map[string]bool // responses in progress in the default conversation
	silent   map[string]bool // responses whose events are not reported (abandoned requests)
	retry    *time.Timer     // a pause before sending a request again
}

func (r *responder) init() {
	r.active = make(map[string]bool)
	r.silent = make(map[string]bool)
}

// failAll fails every waiting request.
func (r *responder) failAll(err error) {
	for _, q := range r.queue {
		q.finish("", err)
	}
	r.queue = nil
	if r.creating != nil {
		r.creating.finish("", err)
		r.creating = nil
	}
	if r.retry != nil {
		r.retry.Stop()
		r.retry = nil
	}
}

// Respond implements model.Model: one response that voices exactly the request, with
// instructions saying what to voice and metadata naming it. It waits for response.created
// (behind the active response, if any, or for the connection to be re-established), bounded
// by Options.RespondTimeout. A request that a dropped connection cut off before its response
// was created returns an id of the adapter's own (LostResponsePrefix), reported started and
// failed at once.
func (m *Model) Respond(req model.Request) (string, error) {
	q := &request{params: responseParams{Instructions: requestInstructions(m.instructions, req), ToolChoice: toolChoiceNone},
		ready: make(chan struct{})}
	names := map[string]string{MetaLabel: req.Label, MetaName: req.Name}
	m.mu.Lock()
	if !m.usable() {
		err := m.broken
		if err == nil {
			err = errClosed
		}
		m.mu.Unlock()
		return "", err
	}
	m.enqueueLocked(q, string(req.Kind), names, req.Metadata)
	m.mu.Unlock()

	t := time.NewTimer(m.opts.RespondTimeout)
	defer t.Stop()
	select {
	case <-q.ready:
		return q.id, q.err
	case <-t.C:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-q.ready:
		return q.id, q.err
	default:
	}
	q.abandoned = true
	for i, x := range m.resp.queue {
		if x == q {
			m.resp.queue = append(m.resp.queue[:i:i], m.resp.queue[i+1:]...)
			break
		}
	}
	q.finish("", ErrRespondTimeout)
	if m.c == nil {
		return "", fmt.Errorf("%w (after %v, reconnecting to the Realtime server)", ErrRespondTimeout, m.opts.RespondTimeout)
	}
	return "", fmt.Errorf("%w (after %v)", ErrRespondTimeout, m.opts.RespondTimeout)
}

// enqueueLocked queues a request of kind with extra metadata and sends it when it may be.
// m.mu is held.
func (m *Model) enqueueLocked(q *request, kind string, extra ...map[string]string) {
	q.tag = m.nextID("req_")
	q.params.Metadata = metadata(q.tag, kind, extra...)
	m.resp.queue = append(m.resp.queue, q)
	m.pumpLocked()
}

// metadata builds response metadata within the Realtime limits (16 pairs, keys of at most 64
// bytes, values of at most 512): the adapter's keys first, then each extra map's in key order;
// a key already set is kept.
func metadata(tag, kind string, extra ...map[string]string) map[string]string {
	md := map[string]string{MetaRequest: tag, MetaKind: kind}
	for _, x := range extra {
		for _, k := range slices.Sorted(maps.Keys(x)) {
			v := x[k]
			if len(md) >= maxMetadataPairs {
				return md
			}
			if _, taken := md[k]; taken || k == "" || len(k) > maxMetadataKey || v == "" {
				continue
			}
			md[k] = clip(v, maxMetadataValue)
		}
	}
	return md
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// pumpLocked sends the next queued request if no response is active or being created.
// m.mu is held.
func (m *Model) pumpLocked() {
	r := &m.resp
	if !m.connected() || r.creating != nil || len(r.active) > 0 || r.retry != nil {
		return
	}
	for len(r.queue) > 0 {
		q := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		if q.abandoned {
			continue
		}
		if q.turn != nil {
			// The turn goes into the conversation just before its response, so that the
			// conversation reads each turn followed by its answer even when turns arrive while
			// another response is active.
			turn := q.turn
			q.turn = nil
			if err := m.sendLocked(itemCreate{Type: evItemCreate, EventID: m.nextID("bc_evt_"), Item: *turn}); err != nil {
				q.finish("", err)
				continue
			}
		}
		q.attempts++
		q.eventID = m.nextID("bc_evt_")
		params := q.params
		if err := m.sendLocked(responseCreate{Type: evResponseCreate, EventID: q.eventID, Response: &params}); err != nil {
			q.finish("", err)
			continue
		}
		r.creating = q
		return
	}
}

// responseCreated: a response began. The request being created is matched by its metadata;
// anything else is a response the server started on its own.
func (m *Model) responseCreated(resp *serverResponse) {
	m.mu.Lock()
	r := &m.resp
	r.active[resp.ID] = true
	if q := r.creating; q != nil && resp.metadata(MetaRequest) == q.tag {
		r.creating = nil
		if q.abandoned {
			// Nobody knows this response: stop it and keep it silent.
			r.silent[resp.ID] = true
			_ = m.sendLocked(responseCancel{Type: evResponseCancel, EventID: m.quietLocked("cancel of an abandoned response"), ResponseID: resp.ID})
		} else {
			q.finish(resp.ID, nil)
		}
	}
	silent := r.silent[resp.ID]
	m.mu.Unlock()
	if !silent {
		m.emit(func(e model.Events) { e.ResponseStarted(resp.ID) })
	}
}

// responseDone: a response ended; the next request may go. Status cancelled reports a
// cancelled response, failed an error; incomplete (output tokens or content filter) is no
// failure: what was said counts by its audio, as the broker judges it.
func (m *Model) responseDone(resp *serverResponse) {
	m.mu.Lock()
	r := &m.resp
	delete(r.active, resp.ID)
	silent := r.silent[resp.ID]
	delete(r.silent, resp.ID)
	delete(m.partials, resp.ID)
	m.pumpLocked()
	m.mu.Unlock()
	if silent {
		return
	}
	cancelled := resp.Status == responseStatusCancelled
	var err error
	if resp.Status == responseStatusFailed {
		err = responseError(resp)
	}
	m.emit(func(e model.Events) { e.ResponseDone(resp.ID, cancelled, err) })
}

// responseError describes a failed response.
func responseError(resp *serverResponse) error {
	msg := "openai: response " + resp.ID + " failed"
	if d := resp.StatusDetails; d != nil {
		if d.Error != nil && (d.Error.Code != "" || d.Error.Type != "") {
			msg += ": " + d.Error.Type
			if d.Error.Code != "" {
				msg += " (" + d.Error.Code + ")"
			}
		} else if d.Reason != "" {
			msg += ": " + d.Reason
		}
	}
	return errors.New(msg)
}

// createFailed handles an error event that answers the request being created: a clash is
// sent again later; any other error fails the request — for its Respond, or, when nobody
// waits for it, as the returned error to report. handled is false for errors about other
// events.
func (m *Model) createFailed(e *serverError) (handled bool, report error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &m.resp
	q := r.creating
	if q == nil || e.EventID == "" || e.EventID != q.eventID {
		return false, nil
	}
	r.creating = nil
	if e.Code == codeActiveResponse && q.attempts < maxCreateAttempts && !q.abandoned {
		// The server started a response of its own just before: go again after it.
		r.queue = append([]*request{q}, r.queue...)
		if len(r.active) == 0 && r.retry == nil {
			// Its response.created has not arrived (or it already ended): pause briefly.
			var t *time.Timer
			t = time.AfterFunc(time.Duration(q.attempts)*retryPause, func() {
				m.mu.Lock()
				if r.retry == t {
					r.retry = nil
					m.pumpLocked()
				}
				m.mu.Unlock()
			})
			r.retry = t
		}
		m.log.Debug("openai: response.create clashed with an active response; retrying", "attempt", q.attempts)
		return true, nil
	}
	err := fmt.Errorf("openai: response.create failed: %s", describe(e))
	if q.ready == nil {
		report = err
	}
	q.finish("", err)
	m.pumpLocked()
	return true, report
}

// describe renders a server error.
func describe(e *serverError) string {
	s := e.Message
	if e.Code != "" {
		s += " (" + e.Code + ")"
	} else if e.Type != "" {
		s += " (" + e.Type + ")"
	}
	return s
}
