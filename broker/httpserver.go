package broker

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The HTTP server's limits (SPEC 18): request headers must arrive within 10 s and a request
// body within 30 s; an idle keep-alive connection is closed after 120 s.
//
// net/http's ReadTimeout is not used for the body. It is documented as bounding the whole
// request, and whether it spares the requests that rightly last — an MCP request streaming its
// answer for minutes, a ?follow=1 timeline, a WebSocket — rests on how net/http happens to
// reset the connection's read deadline (today it clears it when it starts its background read
// at the end of a body, and when a handler hijacks the connection); a deadline that fires under
// a running request makes that background read cancel the request's context. The body limit
// is a read deadline of its own instead: set for a request that has a body when its handler
// starts, cleared by the body's reader as soon as the body was read to its end, never set for a
// WebSocket upgrade. A body that is not complete by then makes the reads fail, and the server
// closes the connection after its answer: before it answers, net/http discards what is left of
// the body, and a discard that fails (on the expired deadline) closes the connection.

// Default HTTP limits of SPEC 18.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	DefaultIdleTimeout   = 120 * time.Second
)

// HTTPLimits are the HTTP server's limits (SPEC 18). A zero field means its default; tests set
// short ones.
type HTTPLimits struct {
	// HeaderTimeout is how long a request's headers may take to arrive (default 10 s).
	HeaderTimeout time.Duration
	// BodyTimeout is how long a request's body may take to arrive, counted from when its
	// handler starts (default 30 s). It does not bound how long the request is served.
	BodyTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next request (default
	// 120 s).
	IdleTimeout time.Duration
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// NewHTTPServer returns the HTTP server of handler (Node.Handler's, with the routes mounted on
// it) with the limits of SPEC 18. `backchannel serve` and the test broker both build theirs
// with it, so that tests run the server serve runs.
func NewHTTPServer(handler http.Handler, limits HTTPLimits) *http.Server {
	l := limits.withDefaults()
	return &http.Server{
		Handler:           BodyDeadline(handler, l.BodyTimeout),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
}

// BodyDeadline wraps h so that the body of each request must arrive within d: a request with a
// body (never a WebSocket upgrade) gets a read deadline d from when h is called, cleared once
// h has read its body to the end. Reads of a body that is late fail with a timeout, and the
// connection is closed after the response. A handler that never reads the body it was sent
// leaves the deadline in place for the rest of the request (net/http reads that body away
// itself, past h's reader): a request that sends a body to an endpoint that takes none, such
// as a ?follow=1 timeline, lasts at most d.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || isUpgrade(r) {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // a ResponseWriter without deadlines (not net/http's server)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, left: r.ContentLength}
		h.ServeHTTP(w, r)
	})
}

// isUpgrade reports whether r asks to switch protocols (a WebSocket handshake).
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return r.Header.Get("Upgrade") != ""
}

// deadlineBody is a request body under a read deadline: the deadline is cleared when the body
// has been read to its end (EOF, or all of a declared Content-Length). A read that fails leaves
// it: before the response goes out, net/http discards what is left of the body, that discard
// fails on the expired deadline, and the server closes the connection after answering.
// (Read may run on another goroutine than the handler's, as a reverse proxy's transport does,
// hence the mutex; the ResponseWriter itself is never touched here.)
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	left int64 // bytes of a declared Content-Length still to come (-1: unknown, chunked)

	mu   sync.Mutex
	done bool // the deadline is cleared, or the body failed
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return n, err
	}
	if b.left > 0 {
		b.left -= int64(n)
	}
	switch {
	case err == io.EOF || (err == nil && b.left == 0):
		// The whole body is in: whatever the request does next (an event stream for
		// minutes, say) is not bounded by the body's deadline. (net/http, which starts its
		// background read of the connection at the body's EOF, clears the deadline then as
		// well; this does not count on it.)
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		b.done = true // late or broken: the deadline stays, the connection will be closed
	}
	return n, err
}
