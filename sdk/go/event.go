package backchannel

import (
	"sync"

	"github.com/backchannel-io/backchannel/frames"
)

// EventKind tells what an Event reports.
type EventKind string

// Kinds of Event.
const (
	// EventConnected: the first welcome arrived (Connect is about to return).
	EventConnected EventKind = "connected"
	// EventResumed: after a drop, the slot was resumed on a new connection.
	EventResumed EventKind = "resumed"
	// EventDropped: the transport dropped (Err says why); the host reconnects on its own.
	EventDropped EventKind = "dropped"
	// EventFrame: a server frame that answers none of this host's requests (Frame).
	EventFrame EventKind = "frame"
	// EventStopped: the host stopped for good (Err is its Err); the last event.
	EventStopped EventKind = "stopped"
)

// Event is what Options.OnEvent receives: a connection event or a server frame.
type Event struct {
	// Kind tells what happened.
	Kind EventKind
	// Frame is the server frame, a pointer such as *frames.ToolJobNarration (EventFrame).
	Frame frames.Frame
	// Err is why the transport dropped (EventDropped) or the host stopped (EventStopped).
	Err error
}

// eventLoop delivers events in order on one goroutine, without ever blocking the sender.
type eventLoop struct {
	deliver func(Event)
	mu      sync.Mutex
	q       []Event
	closed  bool
	wake    chan struct{}
}

func newEventLoop(deliver func(Event)) *eventLoop {
	return &eventLoop{deliver: deliver, wake: make(chan struct{}, 1)}
}

// push queues ev (dropped after close, or without a receiver).
func (l *eventLoop) push(ev Event) {
	if l.deliver == nil {
		return
	}
	l.mu.Lock()
	if !l.closed {
		l.q = append(l.q, ev)
	}
	l.mu.Unlock()
	l.signal()
}

// close lets run return once the queue is empty.
func (l *eventLoop) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.signal()
}

func (l *eventLoop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run delivers events until close, then returns after the last one.
func (l *eventLoop) run() {
	for {
		l.mu.Lock()
		if len(l.q) == 0 {
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return
			}
			<-l.wake
			continue
		}
		ev := l.q[0]
		l.q[0] = Event{}
		l.q = l.q[1:]
		l.mu.Unlock()
		l.deliver(ev)
	}
}

// pump feeds an unbounded queue into a channel on a goroutine that lives only while items
// wait; stop closes the channel (items still queued are dropped).
type pump[T any] struct {
	mu      sync.Mutex
	q       []T
	running bool
	stopped bool
	out     chan T
	stopCh  chan struct{}
}

func newPump[T any]() *pump[T] {
	return &pump[T]{out: make(chan T), stopCh: make(chan struct{})}
}

func (p *pump[T]) push(v T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.q = append(p.q, v)
	if !p.running {
		p.running = true
		go p.run()
	}
}

func (p *pump[T]) run() {
	for {
		p.mu.Lock()
		if p.stopped || len(p.q) == 0 {
			p.running = false
			if p.stopped {
				close(p.out)
			}
			p.mu.Unlock()
			return
		}
		v := p.q[0]
		p.mu.Unlock()
		select {
		case p.out <- v:
			p.mu.Lock()
			var zero T
			p.q[0] = zero
			p.q = p.q[1:]
			p.mu.Unlock()
		case <-p.stopCh:
		}
	}
}

func (p *pump[T]) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.stopCh)
	if !p.running {
		close(p.out)
	}
}
