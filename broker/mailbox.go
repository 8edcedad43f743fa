package broker

import "sync"

// mailbox runs a session's events one at a time, in order, on a goroutine that exists only
// while there is work: an idle session costs no goroutine. Job changes have priority over
// everything else, so that what a transition causes is handled before the next frame.
type mailbox struct {
	mu      sync.Mutex
	changes fifo
	events  fifo
	running bool
	closed  bool
	// after, when set, runs after each event (changes drained inside an event included in it).
	after func()
	// runFn is run as a func value, made once: `go m.run()` would allocate a closure for every
	// start of the goroutine, which is every audio packet of an otherwise idle voice session.
	runFn func()
}

// post queues fn; priority puts it ahead of all non-priority events.
func (m *mailbox) post(fn func(), priority bool) bool {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	if priority {
		m.changes.push(fn)
	} else {
		m.events.push(fn)
	}
	start := !m.running
	m.running = true
	if m.runFn == nil {
		m.runFn = m.run
	}
	run := m.runFn
	m.mu.Unlock()
	if start {
		go run()
	}
	return true
}

// next pops the next event, changes first.
func (m *mailbox) next() (func(), bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fn, ok := m.changes.pop(); ok {
		return fn, true
	}
	if fn, ok := m.events.pop(); ok {
		return fn, true
	}
	m.running = false
	return nil, false
}

// nextChange pops the next queued change only (for draining inside an event).
func (m *mailbox) nextChange() (func(), bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changes.pop()
}

func (m *mailbox) run() {
	for {
		fn, ok := m.next()
		if !ok {
			return
		}
		fn()
		if m.after != nil {
			m.after()
		}
	}
}

// close refuses further events; queued ones still run.
func (m *mailbox) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// fifo is a queue of events whose array is reused: popping moves a head index instead of
// reslicing, so a session that handles its events as they come (one or two queued, 50 audio
// packets a second) appends into the same array forever instead of allocating a new one every
// few events.
type fifo struct {
	q    []func()
	head int
}

func (f *fifo) push(fn func()) {
	if f.head > 0 && len(f.q) == cap(f.q) && f.head >= len(f.q)/2 {
		// Full, with at least half of it popped: move the rest to the front.
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, fn)
}

func (f *fifo) pop() (func(), bool) {
	if f.head == len(f.q) {
		return nil, false
	}
	fn := f.q[f.head]
	f.q[f.head] = nil
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	}
	return fn, true
}
