package broker

import (
	"context"
	"crypto/subtle"
	"errors"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/backchannel-io/backchannel/broker/relay"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// Client is one attached connection. It checks the connection's frames against the limits of
// SPEC 2 and decodes them on the connection's own goroutine, then hands them to its session.
type Client struct {
	session *Session
	slot    *Slot
	tr      Transport
	connID  string
	role    frames.Role

	limiter    *rate.Limiter
	violations int       // frames over a limit with no quiet second between them (the reader goroutine's)
	violated   time.Time // when the last of them came
	backlog    backlog   // its messages waiting in the session's mailbox (backpressure.go)
	closed     atomic.Bool
	// Caller audio waiting for the session (audioin.go), and the one event that handles it.
	audio      audioQueue
	audioEvent func()
}

// ConnectionID is the id the welcome named.
func (c *Client) ConnectionID() string { return c.connID }

// SessionID implements Connection.
func (c *Client) SessionID() string { return c.session.id }

// Receive implements Connection: the frame is checked against the limits of SPEC 2 and
// decoded here, then handled on the session's loop.
func (c *Client) Receive(data []byte) {
	if c.closed.Load() {
		return
	}
	lim := &c.session.node.cfg.Limits
	if len(data) > lim.MaxFrameBytes {
		e := frames.Errorf(frames.CodeLimitExceeded, "frame of %d bytes is over the limit of %d bytes", len(data), lim.MaxFrameBytes)
		e.Ref = frames.PeekID(data) // SPEC 2: an answer to a frame carries its id
		c.violation(e)
		return
	}
	if !c.limiter.Allow() {
		e := frames.Errorf(frames.CodeLimitExceeded, "more than %g frames/s (burst %d) on this connection", lim.FramesPerSecond, lim.FrameBurst)
		e.Ref = frames.PeekID(data)
		c.violation(e)
		return
	}
	if c.violations > 0 && time.Since(c.violated) > time.Second {
		// A second within the limits ends a run of violations. (Not any frame within the
		// limits: a reader held back by its session reads slowly enough for the rate limiter
		// to let a frame through now and then, and a flood would never count as one.)
		c.violations = 0
	}
	f, err := frames.DecodeClient(data)
	if err != nil {
		e := decodeError(err)
		c.postHeld(len(data), func() { c.session.clientError(c, e) })
		return
	}
	c.session.node.metrics.frameReceived(f.FrameType())
	var at time.Time // when a caller turn arrived, which may be earlier than when its turn comes
	if _, turn := f.(*frames.CallerText); turn {
		at = c.session.now()
	}
	pre := c.precompile(f) // a tools.declare compiles here, not on the session loop (precompile.go)
	c.postHeld(len(data), func() { pre.during(c.session, func() { c.session.handleFrame(c, f, at) }) })
}

// decodeError is the error frame answering a frame frames.Decode refused (always a
// *frames.Error with its ref; anything else is answered as bad_frame).
func decodeError(err error) *frames.Error {
	var e *frames.Error
	if errors.As(err, &e) {
		return e
	}
	return frames.Errorf(frames.CodeBadFrame, "%v", err)
}

// requestID is the id of a decoded client frame ("" when it has none), for the ref of its
// answer (SPEC 2).
func requestID(f frames.Frame) string {
	if r, ok := f.(interface{ RequestID() string }); ok {
		return r.RequestID()
	}
	return ""
}

// Oversized implements Connection.
func (c *Client) Oversized(size int, ref string) {
	lim := &c.session.node.cfg.Limits
	e := frames.Errorf(frames.CodeLimitExceeded, "frame of at least %d bytes is over the limit of %d bytes", size, lim.MaxFrameBytes)
	e.Ref = ref
	c.violation(e)
}

// violation answers a frame over a limit; a connection that keeps exceeding is closed with
// 1008 (SPEC 2).
func (c *Client) violation(e *frames.Error) {
	c.violations++
	c.violated = time.Now()
	if c.violations > c.session.node.cfg.Limits.MaxViolations {
		// Nothing more is read; the answers already on their way go out first, then this
		// frame's error, then the close.
		c.closed.Store(true)
		s := c.session
		if !s.post(func() {
			s.clientError(c, e)
			s.finishHeld() // the answers, this error last, before the close
			c.tr.Close(StatusPolicy, "limit exceeded repeatedly")
			s.dropped(c)
		}) {
			c.tr.Close(StatusPolicy, "limit exceeded repeatedly")
		}
		return
	}
	c.postHeld(0, func() { c.session.clientError(c, e) }) // the frame itself is not kept
}

// Dropped reports that the transport is gone (read error, closed, missed pongs). It is not
// the end of the session: the slot waits for a resume (SPEC 10).
func (c *Client) Dropped() {
	c.closed.Store(true)
	c.session.post(func() { c.session.dropped(c) })
}

// Hello handles the first frame of a new connection (SPEC 3): it authenticates, creates or
// finds the session, attaches or resumes a slot and sends the welcome (and, on resume, the
// replay). It returns nil after refusing the hello with an error frame and close 1008. A hello
// for a session another live node holds is relayed there (package relay).
func (n *Node) Hello(tr Transport, data []byte) Connection {
	if e, c := n.hello(tr, data, true); e != nil {
		return e
	} else if c != nil {
		return c
	}
	return nil
}

// hello is Hello; a connection relayed from another node (package relay) is never relayed on
// (mayRelay false). It returns the edge of a relayed connection, or the attached Client, or
// neither after a refusal.
func (n *Node) hello(tr Transport, data []byte, mayRelay bool) (*relay.Edge, *Client) {
	f, err := frames.DecodeClient(data)
	if err != nil {
		n.refuse(tr, decodeError(err))
		return nil, nil
	}
	h, ok := f.(*frames.Hello)
	if !ok {
		e := frames.Errorf(frames.CodeBadFrame, "the first frame must be hello, got %s", f.FrameType())
		e.Ref = requestID(f) // SPEC 2: the answer to a frame carries its id
		n.refuse(tr, e)
		return nil, nil
	}
	var loc location
	if h.SessionID != "" {
		loc = n.locate(n.ctx, h.SessionID)
	}
	if loc.place == placeNode {
		if mayRelay {
			e, err := n.relay.Dial(tr, loc.holder, h.SessionID, data)
			if err == nil {
				return e, nil
			}
			if !errors.Is(err, cluster.ErrNotListening) {
				n.log.Warn("broker: relaying a hello to the session's node", "session", h.SessionID, "node", loc.holder, "err", err)
				refusal := frames.Errorf(frames.CodeInternal, "the node that holds session %s cannot be reached; try again", h.SessionID)
				refusal.Ref, refusal.Retryable = h.ID, true
				n.refuse(tr, refusal)
				return nil, nil
			}
		}
		// Not relayed: its node's inbox does not listen (it died holding the session), or the
		// hello came relayed already. This node takes it, once the lease runs out.
		loc.place = placeUnheld
	}
	s, created, e := n.sessionFor(h, loc)
	if e != nil {
		e.Ref = h.ID
		n.refuse(tr, e)
		return nil, nil
	}
	type result struct {
		c *Client
		e *frames.Error
	}
	reply := make(chan result, 1)
	pre := s.precompileHello(h) // its tools compile here, not on the session loop (precompile.go)
	if !s.post(func() { pre.during(s, func() { c, e := s.attach(h, tr, created); reply <- result{c, e} }) }) {
		e := frames.Errorf(frames.CodeSessionEnded, "session %s has ended", s.id)
		e.Ref = h.ID
		n.refuse(tr, e)
		return nil, nil
	}
	r := <-reply
	if r.e != nil {
		r.e.Ref = h.ID
		n.refuse(tr, r.e)
		return nil, nil
	}
	return nil, r.c
}

// refuse answers a hello with an error frame and closes the connection with 1008 (SPEC 3.3).
func (n *Node) refuse(tr Transport, e *frames.Error) {
	data, err := frames.Encode(e)
	if err == nil {
		tr.Send(data)
	}
	n.metrics.errors.WithLabelValues(string(e.Code)).Inc()
	tr.Close(StatusPolicy, string(e.Code))
}

// sessionFor finds (or, for an api_key without session_id, creates) the session a hello
// names, at loc (locate's answer, placeNode excepted), taking it back when no live node holds
// it, and answers every reference the caller may not see exactly as a missing session.
func (n *Node) sessionFor(h *frames.Hello, loc location) (*Session, bool, *frames.Error) {
	notFound := func() *frames.Error {
		if !n.storeReachable() {
			// The lookups that found nothing may have failed: the session may well exist.
			return storeUnavailable()
		}
		return NoSession(h.SessionID)
	}
	unauthorized := func(what string) *frames.Error {
		return frames.Errorf(frames.CodeUnauthorized, "%s", what)
	}
	if h.ResumeToken != "" {
		if h.SessionID == "" {
			return nil, false, frames.Errorf(frames.CodeBadFrame, "field session_id is required with resume_token")
		}
		switch loc = n.takeBack(loc, ""); loc.place {
		case placeHere:
			return loc.session, false, nil
		case placeEnded:
			if slotID, _, ok := parseResumeToken(h.ResumeToken); ok && loc.ended.expiredSlots[slotID] {
				return nil, false, errResumeExpired()
			}
			return nil, false, frames.Errorf(frames.CodeSessionEnded, "session %s has ended", h.SessionID)
		}
		if loc.moving {
			return nil, false, n.tryLater(h.SessionID)
		}
		return nil, false, notFound()
	}
	if h.SessionID == "" {
		if h.APIKey == "" {
			return nil, false, unauthorized("hello needs api_key, or session_id with join_token, api_key or resume_token")
		}
		tenant, ok := n.tenantOf(h.APIKey)
		if !ok {
			return nil, false, unauthorized("unknown api_key")
		}
		s, err := n.CreateSession(tenant, ModelConfig{})
		if errors.Is(err, ErrTooManySessions) {
			return nil, false, frames.Errorf(frames.CodeLimitExceeded, "%s", tooManySessions(n.cfg.Limits.MaxSessionsPerTenant))
		}
		if err != nil {
			return nil, false, frames.Errorf(frames.CodeInternal, "%v", err)
		}
		return s, true, nil
	}
	loc = n.takeBack(loc, "")
	s := loc.session
	var tenant string
	var joinHash, callerHash [32]byte
	var ended, exists bool
	switch {
	case loc.place == placeHere:
		tenant, joinHash, callerHash, exists = s.tenant, s.joinHash, s.callerHash, true
	case loc.place == placeEnded:
		e := loc.ended
		tenant, joinHash, callerHash, ended, exists = e.tenant, e.joinHash, e.callerHash, true, true
	case loc.moving:
		return nil, false, n.tryLater(h.SessionID)
	}
	if !exists && !n.storeReachable() {
		return nil, false, storeUnavailable() // whether it exists cannot be told now
	}
	// A wrong token answers unauthorized whether or not the session exists (SPEC 18); an API
	// key of another tenant answers not_found, exactly as a session that does not exist (3.2).
	switch helloCredential(h) {
	case credJoinToken:
		if hash := hashToken(h.JoinToken); !exists || subtle.ConstantTimeCompare(hash[:], joinHash[:]) != 1 {
			return nil, false, unauthorized("join_token is not valid for this session")
		}
	case credCallerToken:
		if hash := hashToken(h.CallerToken); !exists || subtle.ConstantTimeCompare(hash[:], callerHash[:]) != 1 {
			return nil, false, unauthorized("caller_token is not valid for this session")
		}
		if h.Role != frames.RoleCaller {
			return nil, false, frames.Errorf(frames.CodeForbidden, "the caller token attaches a caller only, not a %s", h.Role)
		}
	case credAPIKey:
		t, ok := n.tenantOf(h.APIKey)
		if !ok {
			return nil, false, unauthorized("unknown api_key")
		}
		if !exists || t != tenant {
			return nil, false, notFound()
		}
	default:
		return nil, false, unauthorized("hello with session_id needs join_token, caller_token, api_key or resume_token")
	}
	if ended {
		return nil, false, frames.Errorf(frames.CodeSessionEnded, "session %s has ended", h.SessionID)
	}
	return s, false, nil
}

// The credentials a hello attaches with, in the order they are tried.
const (
	credNone        = iota
	credJoinToken   // the backend's: any role
	credCallerToken // the end user's: a caller only (SPEC 3.1)
	credAPIKey      // a key of the session's tenant: any role
)

// helloCredential tells which credential of a hello with session_id attaches it (its
// resume_token aside): the join token before the caller token before an API key.
func helloCredential(h *frames.Hello) int {
	switch {
	case h.JoinToken != "":
		return credJoinToken
	case h.CallerToken != "":
		return credCallerToken
	case h.APIKey != "":
		return credAPIKey
	}
	return credNone
}

// errResumeExpired answers a resume of a slot whose resume window ran out (SPEC 10), before or
// after its session ended.
func errResumeExpired() *frames.Error {
	return frames.Errorf(frames.CodeResumeExpired, "the resume window of this slot has passed")
}

// moving answers a hello for a session whose node stopped answering while its lease still runs:
// the session is taken over once the lease runs out (journal.go), so the client tries again
// (an internal error is one the SDKs retry).
func moving(id string) *frames.Error {
	e := frames.Errorf(frames.CodeInternal, "session %s is moving: the node that held it stopped answering; try again", id)
	e.Retryable = true
	return e
}

// attach attaches a hello's connection to a new slot, or resumes one (SPEC 3, 10).
func (s *Session) attach(h *frames.Hello, tr Transport, created bool) (*Client, *frames.Error) {
	if s.ended {
		// A hello that found the session just before it ended is answered as after (sessionFor).
		if slotID, _, ok := parseResumeToken(h.ResumeToken); ok && s.endInfo != nil && s.endInfo.expiredSlots[slotID] {
			return nil, errResumeExpired()
		}
		return nil, frames.Errorf(frames.CodeSessionEnded, "session %s has ended", s.id)
	}
	if h.ResumeToken != "" {
		return s.resume(h, tr)
	}
	switch h.Role {
	case frames.RoleCaller:
		if s.caller != nil || s.agent != nil {
			return nil, frames.Errorf(frames.CodeForbidden, "the session already has a caller or a text agent")
		}
	case frames.RoleAgent:
		if s.agent != nil || s.caller != nil || s.port != nil {
			return nil, frames.Errorf(frames.CodeForbidden, "the session already has a text agent or a caller")
		}
	case frames.RoleHost:
		if n, limit := s.hostSlots(), s.node.cfg.Limits.MaxHostSlots; n >= limit {
			return nil, frames.Errorf(frames.CodeLimitExceeded, "the session has %d host slots, the most allowed (--max-host-slots)", limit)
		}
	}
	s.orders++
	sl := &Slot{id: "sl" + randomID(10), role: h.Role, order: s.orders, byCaller: helloCredential(h) == credCallerToken,
		out: newOutbox(s.node.cfg.Limits.OutboxFrames, s.node.cfg.Limits.OutboxBytes)}
	s.slots[sl.id] = sl
	switch h.Role {
	case frames.RoleCaller:
		s.caller = sl
	case frames.RoleAgent:
		s.agent = sl
		s.text = s.agentText(sl) // continues a conversation MCP clients left (SPEC 14)
	}
	c, e := s.connect(sl, tr, created, h.ID, [32]byte{})
	if e != nil {
		delete(s.slots, sl.id)
		switch sl {
		case s.caller:
			s.caller = nil
		case s.agent:
			s.agent, s.text = nil, nil
		}
		return nil, e
	}
	if len(h.Tools) > 0 {
		s.declare(sl, h.ID, h.Tools)
	}
	s.callerUp(sl)
	return c, nil
}

// hostSlots counts the session's host slots, attached or waiting for a resume.
func (s *Session) hostSlots() int {
	n := 0
	for _, sl := range s.slots {
		if sl.role == frames.RoleHost {
			n++
		}
	}
	return n
}

// callerUp starts the voice side when the first caller attaches (SPEC 10: a voice session's
// model starts with its first caller) and frees the floor for it.
func (s *Session) callerUp(sl *Slot) {
	if sl != s.caller {
		return
	}
	if s.voice == nil {
		s.voice = s.startVoice()
		if s.voice != nil && s.adopt {
			s.adopt = false
			s.adoptVoiceJobs()
		}
	}
	if s.voice != nil {
		s.voice.CallerAttached()
	}
}

// connect gives slot sl the connection tr: a fresh resume token, and the welcome answering the
// hello whose id is ref (SPEC 2: every answer carries ref). used is the hash of the token a
// resuming hello presented (zero for a new slot): for a relayed connection it stays valid
// until the welcome is confirmed (welcomeConfirmed) — the same token through any number of
// lost welcomes.
func (s *Session) connect(sl *Slot, tr Transport, created bool, ref string, used [32]byte) (*Client, *frames.Error) {
	token, hash := newResumeToken(sl.id)
	prev, prevHash, prevOK, prevKept := sl.tokenHash, sl.prevHash, sl.prevOK, sl.prevKept
	// A relayed connection's welcome may be lost between the nodes (a Redis restart): until
	// its edge confirms it (welcomeConfirmed), the hello's token stays valid too. The journal
	// keeps it until the client has shown it has the welcome (welcomeReceived).
	resumed := used != [32]byte{}
	sl.tokenHash, sl.prevHash, sl.prevOK, sl.prevKept = hash, used, relay.IsRemote(tr) && resumed, resumed
	if err := s.saveJournal(); err != nil { // the token's hash, before the token goes out
		sl.tokenHash, sl.prevHash, sl.prevOK, sl.prevKept = prev, prevHash, prevOK, prevKept
		return nil, storeUnavailable()
	}
	if s.fault(FaultBeforeWelcome) {
		return nil, storeUnavailable() // the node was stopped here: nothing more is sent
	}
	lim := &s.node.cfg.Limits
	c := &Client{session: s, slot: sl, tr: tr, connID: "conn_" + randomID(16), role: sl.role,
		limiter: rate.NewLimiter(rate.Limit(lim.FramesPerSecond), lim.FrameBurst)}
	c.audioEvent = c.handleAudio
	sl.client = c
	sl.detached = time.Time{}
	if sl.expiry != nil {
		sl.expiry.Stop()
		sl.expiry = nil
	}
	s.stopIdle()
	s.node.metrics.connections.Inc()
	w := &frames.Welcome{Reply: frames.Reply{Ref: ref}, SessionID: s.id, ConnectionID: c.connID, ResumeToken: token,
		ResumeWindowMS: s.node.cfg.ResumeWindow.Milliseconds(), HeartbeatMS: s.node.cfg.Heartbeat.Milliseconds(),
		ServerTimeMS: time.Now().UnixMilli()}
	if created {
		w.JoinToken = s.joinToken
	}
	data, _ := frames.Encode(w)
	tr.Send(data)
	return c, nil
}

// welcomeConfirmed: the edge of the relayed connection c got its welcome and writes it to the
// client, so the token the hello used is spent on this node (until then it stays valid beside
// the new one: SPEC 10's rotation is kept for every welcome a client received). The journal
// keeps it until welcomeReceived.
func (s *Session) welcomeConfirmed(c *Client) {
	if sl := c.slot; sl != nil && sl.client == c {
		sl.prevOK = false
	}
}

// welcomeReceived: a frame came on connection c, so its client has the welcome, and the token
// its hello used is spent in the journal too (Slot.prevKept).
func (s *Session) welcomeReceived(c *Client) {
	sl := c.slot
	if sl == nil || sl.client != c || s.ended || !sl.prevKept {
		return
	}
	sl.prevOK, sl.prevKept = false, false
	_ = s.saveJournal()
}

// tryLater answers a hello for a session this node could not take yet (takeBack): another
// node's lease still runs (moving), or the store did not answer.
func (n *Node) tryLater(id string) *frames.Error {
	if !n.storeReachable() {
		return storeUnavailable()
	}
	return moving(id)
}

// storeReachable reports whether the node's store answers a ping now (the memory store always
// does).
func (n *Node) storeReachable() bool {
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	return n.store.Ping(ctx) == nil
}

// storeUnavailable answers a hello or a frame whose change the store could not keep: nothing
// was changed, and the client tries again (an internal error is one the SDKs retry).
func storeUnavailable() *frames.Error {
	e := frames.Errorf(frames.CodeInternal, "the session store is unreachable; nothing was changed, try again")
	e.Retryable = true
	return e
}

// resume takes over a slot with a resume token (SPEC 10): the token rotates, the old
// connection (if still open) is closed with 1008 `resumed`, every frame after last_seq is
// replayed in order, then tool_deferred_resume lists the slot's deferred jobs, then the tools
// of the hello are declared.
func (s *Session) resume(h *frames.Hello, tr Transport) (*Client, *frames.Error) {
	slotID, secret, ok := parseResumeToken(h.ResumeToken)
	if !ok {
		return nil, frames.Errorf(frames.CodeResumeInvalid, "resume_token is not valid")
	}
	if s.expired[slotID] {
		return nil, errResumeExpired()
	}
	sl := s.slots[slotID]
	if sl == nil {
		return nil, frames.Errorf(frames.CodeResumeInvalid, "resume_token is not valid")
	}
	hash := hashToken(secret)
	// The previous token (prevOK: a relayed welcome not confirmed) resumes even while this
	// node still has the connection it was used for: its edge may have closed it (the relay
	// broke) before this node heard of the drop, and its client never got the new token.
	if subtle.ConstantTimeCompare(hash[:], sl.tokenHash[:]) != 1 &&
		(!sl.prevOK || subtle.ConstantTimeCompare(hash[:], sl.prevHash[:]) != 1) {
		return nil, frames.Errorf(frames.CodeResumeInvalid, "resume_token was already used or is not valid")
	}
	replay, ok := sl.out.since(h.LastSeq)
	if !ok {
		return nil, frames.Errorf(frames.CodeResumeInvalid, "frames lost: last_seq %d is older than what the outbox still holds", h.LastSeq)
	}
	old := sl.client
	c, e := s.connect(sl, tr, false, h.ID, hash)
	if e != nil {
		return nil, e
	}
	if old != nil {
		old.closed.Store(true)
		old.tr.Close(StatusPolicy, "resumed")
		s.node.metrics.connections.Dec()
	}
	sl.sent = h.LastSeq
	for _, f := range replay {
		if from := s.heldFrom(sl); from != 0 && f.seq >= from {
			break // the journal does not have it yet: it goes out once it does (held.go)
		}
		tr.Send(f.data)
		sl.sent = f.seq
	}
	s.record(jobs.KindResume, map[string]any{"slot": sl.id, "role": string(sl.role), "connection_id": c.connID,
		"last_seq": h.LastSeq, "replayed": len(replay)})
	if sl.declared {
		s.send(sl, &frames.ToolDeferredResume{Jobs: s.deferredJobsOf(sl)})
	}
	if len(h.Tools) > 0 {
		s.declare(sl, h.ID, h.Tools)
	}
	s.callerUp(sl)
	return c, nil
}

// deferredJobsOf lists the open deferred jobs a slot serves.
func (s *Session) deferredJobsOf(sl *Slot) []frames.ResumedJob {
	open, err := s.engine().OpenJobs(s.ctx(), s.tenant, s.id)
	if err != nil {
		s.node.log.Error("broker: listing jobs for tool_deferred_resume", "session", s.id, "err", err)
	}
	out := []frames.ResumedJob{}
	for _, j := range open {
		if j.Slot != sl.id || j.State != jobs.Deferred {
			continue
		}
		rj := frames.ResumedJob{CallID: j.CallID, Handle: j.Handle, Name: j.Tool.Name, Arguments: j.Arguments,
			StatusLabel: j.StatusLabel, State: j.State, DeadlineMS: j.DeadlineMS}
		if len(rj.Arguments) == 0 {
			rj.Arguments = []byte("{}")
		}
		if ia := j.Interaction; ia != nil {
			rj.OpenInteraction = &frames.Interaction{ID: ia.ID, Prompt: ia.Prompt, Options: ia.Options}
		}
		out = append(out, rj)
	}
	return out
}

// dropped detaches a slot whose connection is gone and starts its resume window (SPEC 10).
func (s *Session) dropped(c *Client) {
	sl := c.slot
	if s.ended || sl.client != c {
		return
	}
	sl.client = nil
	sl.detached = s.now()
	if sl == s.caller && s.voice != nil {
		s.voice.CallerDetached()
	}
	s.node.metrics.connections.Dec()
	s.record(jobs.KindDisconnect, map[string]any{"slot": sl.id, "role": string(sl.role), "connection_id": c.connID})
	sl.expiry = s.after(s.node.cfg.ResumeWindow, func() { s.expireSlot(sl) })
	s.armIdle()
}

// expireSlot closes a slot whose resume window ran out: the jobs it served are cancelled with
// reason discard and its tools are withdrawn (SPEC 10).
func (s *Session) expireSlot(sl *Slot) {
	if s.ended || sl.client != nil || sl.expired {
		return
	}
	sl.expired = true
	sl.expiry = nil
	s.expired[sl.id] = true
	delete(s.slots, sl.id)
	defer s.saveJournal()
	switch sl {
	case s.caller:
		s.caller = nil
	case s.agent:
		s.agent = nil
		if s.text != nil {
			s.text.ending()
			s.text = nil
		}
	}
	open, err := s.engine().OpenJobs(s.ctx(), s.tenant, s.id)
	if err != nil {
		s.node.log.Error("broker: listing jobs of an expired slot", "session", s.id, "err", err)
	}
	for _, j := range open {
		if j.Slot == sl.id {
			if _, _, err := s.engine().Cancel(s.ctx(), s.addr(j.CallID), frames.CancelDiscard); err != nil {
				s.node.log.Error("broker: discarding a job of an expired slot", "call_id", j.CallID, "err", err)
			}
		}
	}
	s.record(jobs.KindNotice, map[string]any{"text": "slot expired", "slot": sl.id, "role": string(sl.role)})
	if s.port != nil && len(sl.tools) > 0 {
		s.port.toolsChanged() // its tools are withdrawn (SPEC 10)
	}
}
