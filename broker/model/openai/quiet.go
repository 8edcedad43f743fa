package openai

// quietEvents remembers the latest client events whose failure is expected and harmless —
// cancelling a response that just ended, truncating or deleting an item that is gone — so
// that the error events answering them are logged, not reported as model failures.
type quietEvents struct {
	order []string
	why   map[string]string
}

// maxQuiet is how many such events are remembered.
const maxQuiet = 64

// add remembers a quiet event id.
func (q *quietEvents) add(id, why string) {
	if q.why == nil {
		q.why = make(map[string]string)
	}
	if len(q.order) >= maxQuiet {
		delete(q.why, q.order[0])
		q.order = q.order[1:]
	}
	q.order = append(q.order, id)
	q.why[id] = why
}

// take reports whether id is a quiet event, and what it was for.
func (q *quietEvents) take(id string) (string, bool) {
	why, ok := q.why[id]
	return why, ok
}

// quietLocked returns a fresh event id whose errors are expected (why says what it was).
// m.mu is held.
func (m *Model) quietLocked(why string) string {
	id := m.nextID("bc_evt_")
	m.quiet.add(id, why)
	return id
}
