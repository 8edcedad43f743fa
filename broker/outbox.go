package broker

// outbox holds the frames of one slot in seq order (SPEC 10): every server frame except
// welcome enters it, gets the slot's next seq there, and stays until the outbox is full, so
// that a resumed connection can be replayed everything after its last_seq. It is bounded by a
// number of frames and of bytes; the oldest frames go first.
type outbox struct {
	frames   []outFrame // oldest first; seqs consecutive
	bytes    int
	next     int64 // the seq of the next frame
	maxCount int
	maxBytes int
}

type outFrame struct {
	seq  int64
	data []byte // the encoded frame, seq included
}

func newOutbox(maxCount, maxBytes int) outbox {
	return outbox{next: 1, maxCount: maxCount, maxBytes: maxBytes}
}

// push appends an encoded frame under the next seq; encode renders the frame with that seq.
func (o *outbox) push(encode func(seq int64) []byte) outFrame {
	f := outFrame{seq: o.next, data: encode(o.next)}
	o.next++
	o.frames = append(o.frames, f)
	o.bytes += len(f.data)
	for len(o.frames) > 1 && (len(o.frames) > o.maxCount || o.bytes > o.maxBytes) {
		o.bytes -= len(o.frames[0].data)
		o.frames[0] = outFrame{}
		o.frames = o.frames[1:]
	}
	return f
}

// replace puts data in place of the frame with seq, keeping its seq; it reports whether the
// frame was still held.
func (o *outbox) replace(seq int64, data []byte) bool {
	i := o.index(seq)
	if i < 0 {
		return false
	}
	o.bytes += len(data) - len(o.frames[i].data)
	o.frames[i].data = data
	return true
}

func (o *outbox) index(seq int64) int {
	if len(o.frames) == 0 {
		return -1
	}
	i := int(seq - o.frames[0].seq)
	if i < 0 || i >= len(o.frames) {
		return -1
	}
	return i
}

// since returns the frames with seq > lastSeq, and false when some of them are no longer held
// (or lastSeq is ahead of what was sent).
func (o *outbox) since(lastSeq int64) ([]outFrame, bool) {
	if lastSeq < 0 || lastSeq >= o.next {
		return nil, lastSeq == o.next-1
	}
	if lastSeq == o.next-1 {
		return nil, true
	}
	i := o.index(lastSeq + 1)
	if i < 0 {
		return nil, false
	}
	return o.frames[i:], true
}
