package broker

import "sync"

// mailbox runs a session's events one at a time, in order, on a goroutine that exists only
// while there is work: an idle session costs no goroutine. Job changes have priority over
// everything else, so that what a transition causes is handled before the next frame.
type mailbox struct {
	mu      sync.Mutex
	changes []func()
	events  []func()
	running bool
	closed  bool
	// after, when set, runs after each event (changes drained inside an event included in it).
	after func()
}

// post queues fn; priority puts it ahead of all non-priority events.
func (m *mailbox) post(fn func(), priority bool) bool {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	if priority {
		m.changes = append(m.changes, fn)
	} else {
		m.events = append(m.events, fn)
	}
	start := !m.running
	m.running = true
	m.mu.Unlock()
	if start {
		go m.run()
	}
	return true
}

// next pops the next event, changes first.
func (m *mailbox) next() (func(), bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var fn func()
	switch {
	case len(m.changes) > 0:
		fn = m.changes[0]
		m.changes[0] = nil
		m.changes = m.changes[1:]
	case len(m.events) > 0:
		fn = m.events[0]
		m.events[0] = nil
		m.events = m.events[1:]
	default:
		m.running = false
		return nil, false
	}
	return fn, true
}

// nextChange pops the next queued change only (for draining inside an event).
func (m *mailbox) nextChange() (func(), bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.changes) == 0 {
		return nil, false
	}
	fn := m.changes[0]
	m.changes[0] = nil
	m.changes = m.changes[1:]
	return fn, true
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
