// Package webrtc is the WebRTC transport of the broker (github.com/pion/webrtc/v4), for
// callers in browsers and phone bridges (SPEC 1, 17).
//
// Signaling is one HTTP exchange, like WHIP: POST /v1/sessions/{id}/webrtc with an SDP offer
// (Content-Type application/sdp, Authorization: Bearer JOIN_TOKEN or an API key of the
// session's tenant) answers 201 with the complete SDP answer — every candidate gathered, no
// trickle — and a Location header naming the peer connection's resource,
// /v1/sessions/{id}/webrtc/{resource}. DELETE on that resource hangs up: the session ends with
// reason hung_up (SPEC 3.6). An offer that finds no address to answer with (every port of the
// configured UDP port range in use) gets 503. See docs/webrtc.md for the ICE options.
//
// The peer connection carries:
//   - one data channel labelled "frames", opened by the client (reliable and ordered): exactly
//     the frames of the WebSocket protocol, one JSON frame per message. The first message is
//     hello, with the same welcome, resume and replay as on /v1/ws. A hello without
//     session_id is taken for the session of the URL; one naming another session is refused.
//   - one audio track each way, PCMU (G.711 µ-law, 8 kHz): the caller's RTP payloads are the
//     caller audio of SPEC 17, and the agent's audio goes out as 20 ms RTP packets.
//
// A closed peer connection, a closed data channel or an ICE failure is a dropped transport,
// not the end of the session (SPEC 10): the caller resumes with a new peer connection and a
// hello carrying resume_token and last_seq. ICE keepalives replace the WebSocket's pings.
//
// A data channel has no close code. Where the WebSocket transport closes with a status, this
// transport sends what is queued, closes the data channel, then the peer connection; what the
// status would have said is carried by the frame before it: session.ended (1000: do not
// reconnect), an error frame (1008 for a refused hello: do not retry as is), or nothing (the
// connection was resumed elsewhere, the broker restarts, or the caller did not keep up —
// resume).
package webrtc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
)

// maxOfferBytes bounds the SDP offer of a POST.
const maxOfferBytes = 256 << 10

// Handler serves /v1/sessions/{id}/webrtc and the resources of its peer connections.
type Handler struct {
	node *broker.Node
	opts Options
	log  *slog.Logger
	api  *webrtc.API
	mux  ice.UDPMux // the single UDP port, when configured
	// The broker hooks of hooks.go, when the node has them.
	authorizer sessionAuthorizer
	taker      sessionTaker
	hangUpper  hangUpper

	mu    sync.Mutex
	peers map[string]*peer // by resource id
	// gone are the resources whose peer connection ended, by resource id: a hang-up through
	// one is still the session's until the caller's resume window has passed (a resource
	// never issued answers 404 and ends nothing: SPEC 18).
	gone    map[string]goneResource
	closed  bool
	wg      sync.WaitGroup
	muxDone sync.Once
}

// NewHandler returns the WebRTC handler of node. It fails when the ICE options cannot be
// applied (e.g. the UDP mux port is taken, or an ICE server's URL is malformed or a TURN
// server has no credentials).
func NewHandler(node *broker.Node, opts Options) (*Handler, error) {
	opts.setDefaults(node.Config().Limits.MaxFrameBytes)
	api, mux, err := opts.api()
	if err != nil {
		return nil, err
	}
	// pion checks the ICE servers when a peer connection is made: check them once now, rather
	// than failing every offer later.
	pc, err := api.NewPeerConnection(webrtc.Configuration{ICEServers: opts.ICEServers})
	if err != nil {
		closeMux(mux)
		return nil, fmt.Errorf("webrtc: ICE servers: %w", err)
	}
	_ = pc.Close()
	h := &Handler{node: node, opts: opts, log: opts.Logger, api: api, mux: mux,
		peers: make(map[string]*peer)}
	h.authorizer, _ = any(node).(sessionAuthorizer)
	h.taker, _ = any(node).(sessionTaker)
	h.hangUpper, _ = any(node).(hangUpper)
	return h, nil
}

// Register mounts h on mux: /v1/sessions/{id}/webrtc and /v1/sessions/{id}/webrtc/{resource}.
// It fits broker.Node.Handler's extra argument.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("/v1/sessions/{id}/webrtc", h)
	mux.Handle("/v1/sessions/{id}/webrtc/{resource}", h)
}

// ServeHTTP answers POST /v1/sessions/{id}/webrtc (an offer) and DELETE
// /v1/sessions/{id}/webrtc/{resource} (hang up).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, resource, ok := parsePath(r.URL.Path)
	if !ok {
		broker.WriteHTTPError(w, http.StatusNotFound, frames.CodeNotFound, "no such resource: "+r.URL.Path)
		return
	}
	if h.node != nil && h.node.ForwardHTTP(w, r, id) {
		return // another node holds the session: its peer connections live there (SPEC 15)
	}
	switch {
	case resource == "" && r.Method == http.MethodPost:
		h.offer(w, r, id)
	case resource == "":
		w.Header().Set("Allow", http.MethodPost)
		broker.WriteHTTPError(w, http.StatusMethodNotAllowed, frames.CodeBadFrame, "POST an SDP offer here")
	case r.Method == http.MethodDelete:
		h.hangUp(w, r, id, resource)
	default:
		// PATCH (trickle ICE, ICE restart) is not supported: answers carry every candidate, and
		// a new peer connection resumes the session.
		w.Header().Set("Allow", http.MethodDelete)
		broker.WriteHTTPError(w, http.StatusMethodNotAllowed, frames.CodeBadFrame, "only DELETE (hang up) is supported on a peer connection's resource")
	}
}

// parsePath splits /v1/sessions/{id}/webrtc[/{resource}].
func parsePath(p string) (id, resource string, ok bool) {
	rest, found := strings.CutPrefix(p, "/v1/sessions/")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] == "webrtc":
		return parts[0], "", true
	case len(parts) == 3 && parts[0] != "" && parts[1] == "webrtc" && parts[2] != "":
		return parts[0], parts[2], true
	}
	return "", "", false
}

// offer is POST /v1/sessions/{id}/webrtc.
func (h *Handler) offer(w http.ResponseWriter, r *http.Request, id string) {
	a := h.authorize(r, id)
	if a.err != nil {
		broker.WriteHTTPError(w, a.status, a.err.Code, a.err.Message)
		return
	}
	if !a.live {
		broker.WriteHTTPError(w, http.StatusGone, frames.CodeSessionEnded, "session "+id+" has ended")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/sdp" {
		broker.WriteHTTPError(w, http.StatusUnsupportedMediaType, frames.CodeBadFrame, "the body must be an SDP offer: Content-Type: application/sdp")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxOfferBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			broker.WriteHTTPError(w, http.StatusRequestEntityTooLarge, frames.CodeLimitExceeded, "the SDP offer is over 256 KiB")
			return
		}
		broker.WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, "the body could not be read: "+err.Error())
		return
	}
	p, err := h.newPeer(id)
	if err != nil {
		if errors.Is(err, errClosed) {
			broker.WriteHTTPError(w, http.StatusServiceUnavailable, frames.CodeInternal, "the broker is shutting down; try again")
			return
		}
		h.log.Error("webrtc: new peer connection", "session", id, "err", err)
		broker.WriteHTTPError(w, http.StatusInternalServerError, frames.CodeInternal, "the peer connection could not be created")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.GatherTimeout)
	defer cancel()
	answer, err := p.negotiate(ctx, string(body))
	if err != nil {
		p.Abort()
		var bad badOffer
		if errors.As(err, &bad) {
			broker.WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, bad.Error())
			return
		}
		if errors.Is(err, errNoCandidates) {
			h.log.Warn("webrtc: no ICE candidate could be gathered: are all ports of the UDP port range in use?", "session", id)
			broker.WriteHTTPError(w, http.StatusServiceUnavailable, frames.CodeInternal,
				"no ICE candidate could be gathered (every UDP port of the broker's range may be in use); try again later")
			return
		}
		h.log.Warn("webrtc: negotiation failed", "session", id, "err", err)
		broker.WriteHTTPError(w, http.StatusInternalServerError, frames.CodeInternal, "negotiation failed: "+err.Error())
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+id+"/webrtc/"+p.id)
	w.Header().Set("Content-Type", "application/sdp")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, answer)
}

// hangUp is DELETE /v1/sessions/{id}/webrtc/{resource}: the session ends with reason hung_up
// (SPEC 3.6), which closes the peer connection after session.ended. The resource stays valid
// for as long as the session lives, even after its peer connection dropped; a session that
// has already ended answers 200 again.
func (h *Handler) hangUp(w http.ResponseWriter, r *http.Request, id, resource string) {
	a := h.authorize(r, id)
	if a.err != nil {
		broker.WriteHTTPError(w, a.status, a.err.Code, a.err.Message)
		return
	}
	if !h.issued(id, resource) {
		broker.WriteHTTPError(w, http.StatusNotFound, frames.CodeNotFound, "no WebRTC resource "+resource+" of session "+id)
		return
	}
	h.mu.Lock()
	p := h.peers[resource]
	h.mu.Unlock()
	if p != nil && p.session != id {
		p = nil
	}
	if !h.hangUpSession(a, id, p) {
		broker.WriteHTTPError(w, http.StatusNotImplemented, frames.CodeInternal,
			"this broker can hang up only through an attached peer connection; send session.end on the data channel")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// goneResource is a resource whose peer connection ended.
type goneResource struct {
	session string
	until   time.Time
}

// issued reports whether resource was issued for session id: its peer connection is open, or
// ended less than a resume window ago.
func (h *Handler) issued(id, resource string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.peers[resource]; p != nil {
		return p.session == id
	}
	g, ok := h.gone[resource]
	return ok && g.session == id && time.Now().Before(g.until)
}

var errClosed = errors.New("webrtc: handler closed")

// track adds (or removes) a peer; adding fails once the handler is closed.
func (h *Handler) track(p *peer, add bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !add {
		delete(h.peers, p.id)
		now := time.Now()
		for id, g := range h.gone {
			if now.After(g.until) {
				delete(h.gone, id)
			}
		}
		if h.gone == nil {
			h.gone = make(map[string]goneResource)
		}
		h.gone[p.id] = goneResource{session: p.session, until: now.Add(h.node.Config().ResumeWindow)}
		return nil
	}
	if h.closed {
		return errClosed
	}
	h.peers[p.id] = p
	h.wg.Add(1)
	return nil
}

// CloseAll closes every peer connection: queued frames first, then the data channel, then
// the peer connection (code is not carried: see the package documentation).
func (h *Handler) CloseAll(code int, reason string) {
	h.mu.Lock()
	ps := make([]*peer, 0, len(h.peers))
	for _, p := range h.peers {
		ps = append(ps, p)
	}
	h.mu.Unlock()
	for _, p := range ps {
		p.Close(code, reason)
	}
}

// Close refuses new offers (503) and closes every peer connection as a service restart (the
// callers resume elsewhere). Call it after the node's Shutdown, then Wait.
func (h *Handler) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.CloseAll(broker.StatusServiceRestart, "service restart")
	return nil
}

// Wait waits until every peer connection has ended, or ctx ends. After Close, it then
// releases the single UDP port, if one was configured.
func (h *Handler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		h.muxDone.Do(func() { closeMux(h.mux) })
	}
	return nil
}

// newResourceID returns 128 random bits, base64url.
func newResourceID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
