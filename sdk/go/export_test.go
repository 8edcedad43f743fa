package backchannel

// LastSeq exposes the highest seq the host has processed, for tests.
func LastSeq(h *Host) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastSeq
}

// Receive hands data to the host's frame router as if the broker had sent it, for tests of
// the seq rules.
func Receive(h *Host, data []byte) { h.receive(data) }

// Requests returns how many requests wait to be written and how many were written without
// a known outcome (barriers not counted), for tests.
func Requests(h *Host) (queued, written int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.pending {
		if !r.barrier {
			written++
		}
	}
	return len(h.queue), written
}
