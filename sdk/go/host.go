package backchannel

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// Host is a connection to the broker in the host role (SPEC 1): it declares tools, runs
// their handlers for each tool_call, and carries the frames of the jobs they defer. A Host
// reconnects on its own when the transport drops and resumes its slot with the latest resume
// token and the highest seq it has processed; the broker replays what was sent meanwhile, and
// the Host drops any frame whose seq it has already processed.
//
// Requests made while the Host is disconnected wait, bounded by their context, and are sent
// after the resume. A request whose frame was sent just before a drop is never resent blindly:
// after the resume the Host learns exactly which of them the broker applied (see ErrUnconfirmed
// for the few it cannot know, and Job.Result for tool_result).
//
// The methods of a Host are safe for concurrent use.
type Host struct {
	opts  Options
	url   string
	log   *slog.Logger
	idPfx string
	ids   atomic.Uint64

	ctx    context.Context // done when the host stops; its cause is the host's Err
	cancel context.CancelCauseFunc

	mu sync.Mutex
	// The session and the slot.
	sessionID    string
	joinToken    string
	resumeToken  string
	resumeWindow time.Duration
	heartbeat    time.Duration
	lastSeq      int64
	// The connection.
	gen               uint64
	cur               *conn
	syncing           bool     // a resumed connection waits for its sync barrier
	syncReq           *request // that barrier
	sawDeferredResume bool     // tool_deferred_resume arrived since the last welcome
	closing           bool
	// Tools, calls and jobs.
	decls    []frames.ToolDecl // the declared tool set
	declared bool              // the slot has a declared tool set
	handlers map[string]Handler
	calls    map[string]*Call // by call id, while the handler runs
	jobs     map[string]*Job  // deferred jobs by call id
	handles  map[string]*Job  // deferred jobs by handle
	// Requests.
	queue   []*request          // not written yet, in order
	pending map[string]*request // written, outcome unknown, by id
	order   uint64
	wake    chan struct{}
	// The end.
	stopped bool
	err     error

	events   *eventLoop
	eventsWG sync.WaitGroup // the event loop
	runWG    sync.WaitGroup // the supervisor
	state    *stateFile
	done     chan struct{}
}

// Connect connects to the broker and sends hello: it creates a session (Options.APIKey
// alone), attaches to one (Options.SessionID with Options.JoinToken or Options.APIKey), or
// resumes the slot saved in Options.StateFile when that file exists. It returns once the
// welcome — and the tools.declared answering Options.Tools — has arrived; frames the broker
// replays on a resume are handled before it returns.
//
// A refused hello is returned as an error wrapping the broker's *frames.Error (errors.As);
// when it says the saved slot cannot be resumed (session_ended, resume_expired,
// resume_invalid, not_found), the state file is removed so that the next Connect starts
// afresh. Connect makes one attempt: it does not retry an unreachable broker.
func Connect(ctx context.Context, opts Options) (*Host, error) {
	u, err := wsURL(opts.URL)
	if err != nil {
		return nil, err
	}
	var st savedState
	var resume bool
	if opts.StateFile != "" {
		if st, resume, err = loadState(opts.StateFile); err != nil {
			return nil, err
		}
		if resume && opts.SessionID != "" && opts.SessionID != st.SessionID {
			return nil, fmt.Errorf("backchannel: Options.StateFile %s belongs to session %s, not to Options.SessionID %s: remove the file or fix the option",
				opts.StateFile, st.SessionID, opts.SessionID)
		}
	}
	if err := opts.check(resume); err != nil {
		return nil, err
	}
	h := newHost(opts, u)
	if resume {
		h.sessionID, h.joinToken, h.lastSeq = st.SessionID, st.JoinToken, st.LastSeq
	}
	hello := &frames.Hello{Protocol: frames.Protocol, Role: frames.RoleHost}
	if resume {
		hello.SessionID, hello.ResumeToken, hello.LastSeq = st.SessionID, st.ResumeToken, st.LastSeq
	} else {
		hello.SessionID, hello.APIKey, hello.JoinToken = opts.SessionID, opts.APIKey, opts.JoinToken
	}
	var declared *request
	if len(opts.Tools) > 0 {
		// A restarted process declares its tools too: it cannot know what its predecessor
		// declared, and replacing the set with the same one changes nothing.
		hello.Tools = decls(opts.Tools)
		if declared, err = h.declareRequest(hello.Tools); err != nil {
			return nil, err
		}
		hello.ID = declared.id
	}
	c, w, err := h.dial(ctx, hello)
	if err != nil {
		if resume && deadSlot(err) {
			h.log.Info("backchannel: the saved slot cannot be resumed; removing the state file", "file", opts.StateFile, "err", err)
			if rerr := (&stateFile{path: opts.StateFile}).finish(true); rerr != nil {
				err = errors.Join(err, rerr)
			}
			err = fmt.Errorf("%w (Options.StateFile was removed: the next Connect starts afresh)", err)
		}
		h.cancel(err)
		return nil, err
	}
	if declared != nil {
		h.order++
		declared.written, declared.gen, declared.order = true, 1, h.order
		h.pending[declared.id] = declared
	}
	if opts.StateFile != "" {
		h.state = &stateFile{path: opts.StateFile, snapshot: h.snapshot}
	}
	h.attach(c, w, false)
	h.runWG.Add(1)
	h.eventsWG.Add(1)
	go func() { defer h.runWG.Done(); h.run(c) }()
	go func() { defer h.eventsWG.Done(); h.events.run() }()
	go h.finish()
	if declared != nil {
		select {
		case rep := <-declared.result:
			err = rep.err
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			_ = h.Close()
			return nil, wrapBroker("declaring Options.Tools", err)
		}
	}
	return h, nil
}

// newHost returns a host that has not connected yet.
func newHost(opts Options, u string) *Host {
	h := &Host{opts: opts, url: u, log: opts.Logger, idPfx: randomString(6),
		resumeWindow: 2 * time.Minute, heartbeat: 15 * time.Second,
		handlers: make(map[string]Handler), calls: make(map[string]*Call), jobs: make(map[string]*Job),
		handles: make(map[string]*Job), pending: make(map[string]*request), wake: make(chan struct{}, 1),
		done: make(chan struct{})}
	if h.log == nil {
		h.log = slog.Default()
	}
	for _, t := range opts.Tools {
		h.handlers[t.Decl.Name] = t.Handler
	}
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	h.events = newEventLoop(opts.OnEvent)
	return h
}

// finish waits for the supervisor, settles the state file, lets the event loop drain, and
// closes Done.
func (h *Host) finish() {
	h.runWG.Wait()
	<-h.ctx.Done()
	err := context.Cause(h.ctx)
	if serr := h.state.finish(deadSlot(err)); serr != nil {
		h.log.Warn("backchannel: state file", "err", serr)
	}
	h.events.push(Event{Kind: EventStopped, Err: err})
	h.events.close()
	h.eventsWG.Wait()
	close(h.done)
}

// snapshot is what the state file keeps.
func (h *Host) snapshot() savedState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return savedState{SessionID: h.sessionID, ResumeToken: h.resumeToken, LastSeq: h.lastSeq, JoinToken: h.joinToken}
}

// SessionID is the id of the host's session.
func (h *Host) SessionID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessionID
}

// JoinToken is the token that lets further connections (the caller, a text agent, other
// hosts) attach to the session. It is known when this host created the session, or attached
// with a join token, or resumed from a state file that holds one; otherwise it is "".
func (h *Host) JoinToken() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.joinToken == "" {
		return h.opts.JoinToken
	}
	return h.joinToken
}

// Done is closed when the host has stopped — after Close, End, the end of the session, or a
// resume that failed for good — and its internal goroutines (the OnEvent deliveries
// included) have returned. Handlers and OnResume goroutines are not waited for; their
// contexts are done by then.
func (h *Host) Done() <-chan struct{} { return h.done }

// Err is nil while the host runs, then why it stopped: ErrClosed after Close, a
// *SessionEndedError after the session ended, or the error of the resume that failed (a
// *frames.Error such as resume_expired, with errors.As).
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// stop ends the host with err: pending requests fail with it, the contexts of handlers and
// jobs are cancelled, and the transport closes. The slot stays resumable unless err says
// otherwise.
func (h *Host) stop(err error) {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped, h.err = true, err
	for _, r := range h.queue {
		h.settleLocked(r, nil, err)
	}
	h.queue = nil
	for _, r := range h.pending {
		h.settleLocked(r, nil, err)
	}
	var jobs []*Job
	for _, j := range h.jobs {
		jobs = append(jobs, j)
	}
	c := h.cur
	h.mu.Unlock()
	h.cancel(err)
	for _, j := range jobs {
		j.end(err)
	}
	if c != nil {
		c.ws.CloseNow()
	}
	h.log.Debug("backchannel: host stopped", "err", err)
}

// Close closes the transport and stops the host; the broker keeps the slot resumable for its
// resume window (with Options.StateFile, a new process can resume it). It returns once the
// transport is closed, before Done. Closing a stopped host does nothing.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closing || h.stopped {
		h.mu.Unlock()
		return nil
	}
	h.closing = true
	c := h.cur
	h.mu.Unlock()
	if c != nil {
		_ = c.ws.Close(websocket.StatusGoingAway, "host closed")
	}
	h.stop(ErrClosed)
	h.runWG.Wait()
	return nil
}

// End ends the session for every participant (session.end, SPEC 3.6): open jobs are
// cancelled with reason discard and every connection gets session.ended. It returns once the
// session has ended, with the host stopped.
func (h *Host) End(ctx context.Context) error {
	r, err := h.newRequest(&frames.SessionEnd{}, silent, resendAlways)
	if err != nil {
		return err
	}
	if _, err := h.do(ctx, r); err != nil && !isEnded(err) {
		return err
	}
	select {
	case <-h.ctx.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := h.Err(); !isEnded(err) {
		return err
	}
	return nil
}

// isEnded reports whether err says the session has ended.
func isEnded(err error) bool {
	var se *SessionEndedError
	return errors.As(err, &se) || isCode(err, frames.CodeSessionEnded)
}

// CancelJob asks the broker to cancel a job of the session (job.cancel, SPEC 5 and 11) by
// its handle or its broker call id; the job's host gets tool_cancel with reason host_request.
// The result tells what the request did (cancelled, already_done, already_canceled,
// unknown_call).
func (h *Host) CancelJob(ctx context.Context, handleOrCallID string) (frames.CancelResult, error) {
	f := &frames.JobCancel{}
	if jobs.IsBrokerCallID(handleOrCallID) { // never a handle (SPEC 6: handle_reserved)
		f.CallID = handleOrCallID
	} else {
		f.Handle = handleOrCallID
	}
	r, err := h.newRequest(f, answered, resendNever)
	if err != nil {
		return "", err
	}
	ans, err := h.do(ctx, r)
	if err != nil {
		return "", wrapBroker("job.cancel of "+handleOrCallID, err)
	}
	res, ok := ans.(*frames.JobCancelResult)
	if !ok {
		return "", fmt.Errorf("backchannel: job.cancel answered with %s", ans.FrameType())
	}
	return res.Result, nil
}

// Inject asks the agent to take a turn about text at the next free floor (SPEC 8), or with
// speak false only adds it to the agent's context. An inject the broker cannot take now is
// answered with an error whose code is inject_rejected (Retryable tells whether to try again
// later).
func (h *Host) Inject(ctx context.Context, text string, speak bool) error {
	f := &frames.Inject{Text: text}
	if !speak {
		f.Speak = &speak
	}
	r, err := h.newRequest(f, silent, resendNever)
	if err != nil {
		return err
	}
	_, err = h.do(ctx, r)
	return wrapBroker("inject", err)
}

// wrapBroker adds what was being done to an error frame; other errors are returned as they
// are.
func wrapBroker(what string, err error) error {
	var fe *frames.Error
	if errors.As(err, &fe) && err == error(fe) {
		return brokerError(what, fe)
	}
	return err
}

// newID returns a request id unique to this host process.
func (h *Host) newID() string {
	return h.idPfx + "-" + strconv.FormatUint(h.ids.Add(1), 10)
}

// lowerBase32 encodes in a-z2-7, the alphabet of broker call ids (SPEC 5).
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomString returns n random characters of a-z2-7.
func randomString(n int) string {
	b := make([]byte, (n*5+7)/8)
	_, _ = rand.Read(b)
	return lowerBase32.EncodeToString(b)[:n]
}
