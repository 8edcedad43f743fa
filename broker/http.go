package broker

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// WriteHTTPError answers an HTTP request with status and the error body of SPEC 3.1,
// { "code", "message" }, code being one of SPEC 2.1. Every HTTP handler of the broker (and of its
// WebRTC and MCP front ends) answers its errors with it.
func WriteHTTPError(w http.ResponseWriter, status int, code frames.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": string(code), "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// BearerToken returns the token of the request's Authorization: Bearer header ("" when it has
// none; the scheme is matched without regard to case).
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// Handler returns the broker's HTTP API (SPEC 3, 16) with ws mounted at /v1/ws and extra
// routes (the AsyncAPI document, pages, /mcp, the WebRTC signaling) added by the caller through
// mux. Every route is behind the origin and host rules of SPEC 18 (guard.go). Serve it with
// NewHTTPServer, which adds the HTTP limits.
func (n *Node) Handler(ws http.Handler, extra func(mux *http.ServeMux)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", n.createSession)
	mux.HandleFunc("GET /v1/sessions/{id}/timeline", n.timeline)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", n.ready)
	mux.Handle("GET /metrics", n.metrics.handler())
	if ws != nil {
		mux.Handle("/v1/ws", ws)
	}
	if extra != nil {
		extra(mux)
	}
	// Everything else under /v1/ is an API resource too: its errors have the JSON body of
	// SPEC 3.1, not the mux's plain-text 404 and 405.
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) { apiNotFound(mux, w, r) })
	return n.newGuard(mux)
}

// apiNotFound answers a request under /v1/ that no route serves: 405 when the path exists for
// another method, else 404 not_found.
func apiNotFound(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/v1/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteHTTPError(w, http.StatusMethodNotAllowed, frames.CodeBadFrame, r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(allow, ", "))
		return
	}
	WriteHTTPError(w, http.StatusNotFound, frames.CodeNotFound, "no resource "+r.URL.Path)
}

// sessionRequest is the body of POST /v1/sessions (SPEC 3.1).
type sessionRequest struct {
	Model    *ModelConfig   `json:"model,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ModelConfig chooses a voice session's model (SPEC 3.1).
type ModelConfig struct {
	Kind         string `json:"kind"`
	Instructions string `json:"instructions,omitempty"`
	Voice        string `json:"voice,omitempty"`
}

// createSession is POST /v1/sessions.
func (n *Node) createSession(w http.ResponseWriter, r *http.Request) {
	tenant, ok := n.tenantOf(BearerToken(r))
	if !ok {
		WriteHTTPError(w, http.StatusUnauthorized, frames.CodeUnauthorized, "a valid API key is required: Authorization: Bearer KEY")
		return
	}
	var req sessionRequest
	body := http.MaxBytesReader(w, r.Body, int64(n.cfg.Limits.MaxFrameBytes))
	raw := new(bytes.Buffer)
	if _, err := raw.ReadFrom(body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteHTTPError(w, http.StatusRequestEntityTooLarge, frames.CodeLimitExceeded,
				fmt.Sprintf("the body is over the limit of %d bytes", tooBig.Limit))
			return
		}
		WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, "the body could not be read: "+err.Error())
		return
	}
	if text := bytes.TrimSpace(raw.Bytes()); len(text) > 0 {
		const shape = "the body must be one JSON object {model?, metadata?}"
		if text[0] != '{' {
			WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, shape)
			return
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		if err := dec.Decode(&req); err != nil {
			WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, shape+": "+err.Error())
			return
		}
		if dec.More() || dec.InputOffset() != int64(len(text)) {
			WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, shape+": something follows it")
			return
		}
	}
	if m := req.Model; m != nil && m.Kind != "" && m.Kind != "scripted" && m.Kind != "openai" {
		WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, `field model.kind must be one of scripted, openai`)
		return
	}
	var mc ModelConfig
	if req.Model != nil {
		mc = *req.Model
	}
	if mc.Kind != "" && n.cfg.Models[mc.Kind] == nil {
		WriteHTTPError(w, http.StatusBadRequest, frames.CodeBadFrame, "field model.kind "+mc.Kind+" is not configured on this server")
		return
	}
	s, err := n.CreateSession(tenant, mc)
	if errors.Is(err, ErrTooManySessions) {
		WriteHTTPError(w, http.StatusTooManyRequests, frames.CodeLimitExceeded, tooManySessions(n.cfg.Limits.MaxSessionsPerTenant))
		return
	}
	if err != nil {
		WriteHTTPError(w, http.StatusServiceUnavailable, frames.CodeInternal, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"session_id":       s.id,
		"join_token":       s.joinToken,
		"caller_token":     s.callerToken,
		"caller_url":       n.callerURL(r, s),
		"resume_window_ms": n.cfg.ResumeWindow.Milliseconds(),
	})
}

// tooManySessions is the message of limit_exceeded for one session more than the tenant may have.
func tooManySessions(limit int) string {
	return fmt.Sprintf("the tenant has %d open sessions, the most allowed (--max-sessions-per-tenant)", limit)
}

// callerURL is the page a caller opens to join the session: the try-it page with the session
// and its caller token, never the join token (SPEC 3.1).
func (n *Node) callerURL(r *http.Request, s *Session) string {
	base := n.cfg.PublicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	q := url.Values{"session": {s.id}, "caller_token": {s.callerToken}}
	return strings.TrimRight(base, "/") + "/?" + q.Encode()
}

// NoSession is the not_found error of a session id the caller may not see: one that does not
// exist and one of another tenant are answered exactly alike.
func NoSession(id string) *frames.Error {
	return frames.Errorf(frames.CodeNotFound, "no session %q", id)
}

// AuthStatus is the HTTP status of an error AuthorizeSession or TakeBack returns: 404 for
// not_found, 503 for a session that is moving to another node (try again), 401 otherwise.
func AuthStatus(e *frames.Error) int {
	switch e.Code {
	case frames.CodeNotFound:
		return http.StatusNotFound
	case frames.CodeInternal:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// AuthorizeSession checks token — an API key of the session's tenant, or the session's join
// token — for the resources of session id (SPEC 3.1, 3.5), where locate finds it; it only
// authorizes (a session no live node holds is taken by TakeBack, first). It returns the
// session's tenant and whether the session is still live (an ended one is remembered for the
// retention period), or an error frame: not_found (no such session, or one of another tenant:
// exactly alike, for an API key) or unauthorized (a wrong token, whether or not the session
// exists: SPEC 18).
func (n *Node) AuthorizeSession(id, token string) (tenant string, live bool, err *frames.Error) {
	return n.authorize(n.locate(n.ctx, id), token, false)
}

// AuthorizeSignaling is AuthorizeSession for the session's WebRTC signaling (the offer and the
// hang-up), which the caller token reaches too (SPEC 3.1).
func (n *Node) AuthorizeSignaling(id, token string) (tenant string, live bool, err *frames.Error) {
	return n.authorize(n.locate(n.ctx, id), token, true)
}

// authorize is AuthorizeSession (callerToo: AuthorizeSignaling) for the session at loc.
func (n *Node) authorize(loc location, token string, callerToo bool) (tenant string, live bool, err *frames.Error) {
	id := loc.id
	keyTenant, isKey := n.tenantOf(token)
	var sTenant string
	var joinHash, callerHash [32]byte
	switch loc.place {
	case placeHere:
		s := loc.session
		sTenant, joinHash, callerHash, live = s.tenant, s.joinHash, s.callerHash, true
	case placeEnded:
		e := loc.ended
		sTenant, joinHash, callerHash = e.tenant, e.joinHash, e.callerHash
	}
	hash := hashToken(token)
	switch {
	case isKey:
		if sTenant == "" || sTenant != keyTenant {
			return "", false, NoSession(id)
		}
		return sTenant, live, nil
	case token != "" && sTenant != "" && subtle.ConstantTimeCompare(hash[:], joinHash[:]) == 1:
		return sTenant, live, nil
	case callerToo && token != "" && sTenant != "" && subtle.ConstantTimeCompare(hash[:], callerHash[:]) == 1:
		return sTenant, live, nil
	}
	if callerToo {
		return "", false, frames.Errorf(frames.CodeUnauthorized, "an API key of the session's tenant, its join token or its caller token is required")
	}
	return "", false, frames.Errorf(frames.CodeUnauthorized, "an API key of the session's tenant or its join token is required")
}

// HangUp ends tenant's live session id with reason hung_up (SPEC 3.6: an explicit hang-up, the
// WebRTC resource's DELETE) and returns once session.ended went to every connection. It reports
// false when tenant has no such live session.
func (n *Node) HangUp(tenant, id string) bool {
	s := n.session(id)
	if s == nil || s.tenant != tenant {
		return false
	}
	done := make(chan struct{})
	if !s.post(func() { s.end(endHungUp); close(done) }) {
		return false
	}
	<-done
	return true
}

// heldElsewhere reports whether, as locate found it, another node of the cluster holds
// tenant's session (a new session has no timeline entries yet).
func (loc location) heldElsewhere(tenant string) bool {
	return loc.holder != "" && loc.holderTenant == tenant
}

// timeline is GET /v1/sessions/{id}/timeline and its ?follow=1 stream (SPEC 16).
//
// A session another live node holds is that node's to answer: the request is forwarded there
// (forward.go). One no node holds — parked, or its node gone — is answered from the store for
// an API key of its tenant, where timelines are kept per tenant (SPEC 15, 16); a tenant without
// entries for the id gets not_found, exactly as for a missing session, unless another node
// holds a session of that tenant with the id (it has no entries yet).
func (n *Node) timeline(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	loc := n.locate(r.Context(), id)
	if n.forward(w, r, loc) {
		return // another live node holds it: it answers (and checks a join token)
	}
	token := BearerToken(r)
	// Parked by a node that stopped, or journaled by one that died: this node serves it now.
	loc, e := n.takeBackFor(loc, token)
	var tenant string
	if e == nil {
		tenant, _, e = n.authorize(loc, token, false)
	}
	remote := false
	if e != nil && e.Code == frames.CodeNotFound {
		if keyTenant, isKey := n.tenantOf(token); isKey {
			tenant, remote, e = keyTenant, true, nil
		}
	}
	if e != nil {
		WriteHTTPError(w, AuthStatus(e), e.Code, e.Message)
		return
	}
	entries, err := n.engine.Timeline(r.Context(), tenant, id, 0)
	if err != nil {
		WriteHTTPError(w, http.StatusServiceUnavailable, frames.CodeInternal, "the store is not reachable; try again")
		return
	}
	if remote && len(entries) == 0 && !loc.heldElsewhere(tenant) {
		e := NoSession(id)
		WriteHTTPError(w, http.StatusNotFound, e.Code, e.Message)
		return
	}
	if entries == nil {
		entries = []jobs.Entry{}
	}
	if r.URL.Query().Get("follow") != "1" {
		writeJSON(w, http.StatusOK, map[string]any{"session_id": id, "entries": entries})
		return
	}
	release, ok := n.addFollower(tenant, id)
	if !ok {
		WriteHTTPError(w, http.StatusTooManyRequests, frames.CodeLimitExceeded,
			fmt.Sprintf("the session already has %d timeline followers (the limit, --max-timeline-followers): one must end first", n.cfg.Limits.MaxTimelineFollowers))
		return
	}
	defer release()
	n.follow(w, r, tenant, id, entries, remote)
}

// follow streams a timeline as application/x-ndjson: the existing entries, then each new one
// as it is appended, until the client goes away, the node shuts down, or the session ended and
// everything was sent. The session of a remote timeline (one this node does not serve) has
// ended once its session_end entry was sent.
func (n *Node) follow(w http.ResponseWriter, r *http.Request, tenant, id string, first []jobs.Entry, remote bool) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	sent, sawEnd := 0, false
	write := func(es []jobs.Entry) bool {
		for _, e := range es {
			if err := enc.Encode(e); err != nil {
				return false
			}
			sent++
			sawEnd = sawEnd || e.Kind == jobs.KindSessionEnd
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !write(first) {
		return
	}
	ctx := r.Context()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var endedAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		es, err := n.engine.Timeline(ctx, tenant, id, sent)
		if err != nil {
			continue
		}
		if !write(es) {
			return
		}
		over := n.session(id) == nil
		if remote {
			over = sawEnd
		}
		if over {
			if endedAt.IsZero() {
				endedAt = time.Now()
			} else if time.Since(endedAt) > time.Second {
				return // the session ended and its last entries went out
			}
		}
	}
}

// ready is /readyz: the store must answer, and the journal take writes (journalhealth.go). It
// is unauthenticated, so a failure says only that (SPEC 18: {"ready": false, "reason": "store
// unreachable"} or "journal writes failing"); the store's error, which names its address, goes
// to the log.
func (n *Node) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := n.store.Ping(ctx); err != nil {
		n.log.Warn("broker: /readyz: the store is not reachable", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "store unreachable"})
		return
	}
	if n.journalFailing() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "journal writes failing"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "status": "ready"})
}
