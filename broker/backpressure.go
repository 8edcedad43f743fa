package broker

import (
	"sync"
	"time"
)

// backlog holds back a connection whose messages arrive faster than its session handles them
// (SPEC 2): at most Limits.MailboxFrames messages or Limits.MailboxBytes bytes of one connection
// wait in its session's mailbox. Past that the connection's reader waits in admit — the
// connection is not read — until the session has caught up, so a flood is held back by TCP,
// not by the broker's memory. Every admitted message is released exactly once: by the event
// that handles it (the mailbox runs what it queued even after it closes), or at once when the
// session took no more events.
type backlog struct {
	mu     sync.Mutex
	frames int
	bytes  int
	space  chan struct{} // signalled when a message is released
}

// admit waits until the connection may queue one more message of n bytes, and counts it. A
// message always fits when nothing of the connection is queued (a frame is at most the frame
// limit, below the byte bound by default). It reports false when the connection was closed
// while it waited.
func (c *Client) admit(n int) bool {
	lim := &c.session.node.cfg.Limits
	b := &c.backlog
	for {
		b.mu.Lock()
		if b.space == nil {
			b.space = make(chan struct{}, 1)
		}
		if b.frames == 0 || (b.frames < lim.MailboxFrames && b.bytes+n <= lim.MailboxBytes) {
			b.frames++
			b.bytes += n
			b.mu.Unlock()
			return true
		}
		space := b.space
		b.mu.Unlock()
		c.session.node.metrics.heldBack.Inc()
		select {
		case <-space:
		case <-time.After(time.Second): // a safety net only: releases signal space
		}
		if c.closed.Load() {
			return false
		}
	}
}

// release uncounts an admitted message of n bytes.
func (c *Client) release(n int) {
	b := &c.backlog
	b.mu.Lock()
	b.frames--
	b.bytes -= n
	space := b.space
	b.mu.Unlock()
	select {
	case space <- struct{}{}:
	default:
	}
}

// postHeld queues fn, an event handling a message of n bytes of the connection, once the
// connection's backlog has room for it; the message is released when fn has run.
func (c *Client) postHeld(n int, fn func()) {
	if !c.admit(n) {
		return
	}
	if !c.session.post(func() { defer c.release(n); fn() }) {
		c.release(n)
	}
}
