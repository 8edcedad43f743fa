package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// writeTimeout bounds one WebSocket write.
const writeTimeout = 10 * time.Second

// errStalled is the failure of a connection whose client events piled up unwritten.
var errStalled = errors.New("openai: the connection stalled: too many client events wait to be written")

// conn is the WebSocket connection to the Realtime server: client events are queued and
// written in order by one writer goroutine, so sending never blocks the broker; the caller
// of read runs the one reader.
type conn struct {
	ws       *websocket.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	maxQueue int

	mu      sync.Mutex
	queue   [][]byte
	queued  int   // bytes in queue
	err     error // set once the connection failed or was closed
	wake    chan struct{}
	stop    chan struct{}
	written chan struct{} // closed when the writer has exited
	closing sync.Once
}

// dial connects to URL?model=MODEL with the bearer key (GA protocol: no beta header).
func dial(ctx context.Context, o Options) (*conn, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("openai: bad URL %q: %w", o.URL, err)
	}
	q := u.Query()
	q.Set("model", o.Model)
	u.RawQuery = q.Encode()
	h := http.Header{}
	if o.APIKey != "" {
		h.Set("Authorization", "Bearer "+o.APIKey)
	}
	dctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(dctx, u.String(), &websocket.DialOptions{HTTPClient: o.HTTPClient, HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return nil, &statusError{status: resp.StatusCode, err: fmt.Errorf("openai: dialing %s: HTTP %d: %w", redact(u), resp.StatusCode, err)}
		}
		return nil, fmt.Errorf("openai: dialing %s: %w", redact(u), err)
	}
	ws.SetReadLimit(o.ReadLimit)
	c := &conn{ws: ws, maxQueue: o.SendQueueBytes, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		written: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.writeLoop()
	return c, nil
}

// statusError is a dial the server answered with an HTTP status instead of a WebSocket.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// permanent reports whether a failed dial cannot succeed by trying again: the server refused
// the request itself (HTTP 4xx, except 408 and 429) — a bad key, model or URL.
func permanent(err error) bool {
	var se *statusError
	if !errors.As(err, &se) {
		return false
	}
	return se.status >= 400 && se.status < 500 && se.status != http.StatusRequestTimeout && se.status != http.StatusTooManyRequests
}

// redact is the URL without user information, for error messages.
func redact(u *url.URL) string {
	v := *u
	v.User = nil
	return v.String()
}

// send queues one client event; it never blocks. It fails once the connection is gone, or
// when the queue outgrows its bound (the connection is then closed).
func (c *conn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("openai: encoding a client event: %w", err)
	}
	return c.sendEncoded(b)
}

// sendEncoded queues one encoded client event, which the connection then owns, like send.
func (c *conn) sendEncoded(b []byte) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if c.queued+len(b) > c.maxQueue {
		c.err = errStalled
		c.mu.Unlock()
		_ = c.ws.CloseNow()
		return errStalled
	}
	c.queue = append(c.queue, b)
	c.queued += len(b)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// writeLoop writes queued events in order until the connection stops or fails.
func (c *conn) writeLoop() {
	defer close(c.written)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			batch := c.queue
			c.queue, c.queued = nil, 0
			c.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, b := range batch {
				ctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
				err := c.ws.Write(ctx, websocket.MessageText, b)
				cancel()
				if err != nil {
					c.fail(fmt.Errorf("openai: writing: %w", err))
					_ = c.ws.CloseNow()
					return
				}
			}
		}
	}
}

// read returns the next server event's bytes.
func (c *conn) read() ([]byte, error) {
	for {
		typ, b, err := c.ws.Read(c.ctx)
		if err != nil {
			return nil, err
		}
		if typ == websocket.MessageText {
			return b, nil
		}
	}
}

// fail records the connection's first failure; later sends return it.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// failure is why the connection failed on the writing side (nil if it did not).
func (c *conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// close ends the connection with a normal closure after the writer stopped; the reader's
// read then returns. It may be called more than once.
func (c *conn) close() {
	c.closing.Do(func() {
		c.fail(errClosed)
		close(c.stop)
		<-c.written
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
		c.cancel()
	})
}
