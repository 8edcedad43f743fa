package broker

import (
	"sync"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// Caller audio is the busiest path of a voice session: 50 packets a second per caller. A
// packet goes from the transport's reader to the session's loop without allocating: its bytes
// are copied into a buffer of the connection's audioQueue that is reused once the session has
// handled it, and the event posted for it is the connection's one audio handler (a method
// value made once), not a closure per packet. Packets and events pair up in order — the k-th
// audio event of a connection handles its k-th queued packet — so audio keeps its place among
// the connection's other messages.

// audioChunk is one queued packet of caller audio.
type audioChunk struct {
	data []byte    // a buffer of the queue's, reused
	at   time.Time // when it arrived, on the node's clock: the VAD's speech start
	read time.Time // when the transport read it, on the node's clock: the inbound delay
}

// audioQueue is a ring of the packets of one connection waiting for its session, written by
// the connection's reader and read by the session's loop. It holds at most what the
// connection's backlog admits (Limits.MailboxFrames), and grows only to that.
type audioQueue struct {
	mu   sync.Mutex
	ring []audioChunk
	head int
	n    int
}

// push queues a copy of data.
func (q *audioQueue) push(data []byte, at, read time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == len(q.ring) {
		ring := make([]audioChunk, max(8, 2*len(q.ring)))
		for i := range q.n {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	e := &q.ring[(q.head+q.n)%len(q.ring)]
	e.data = append(e.data[:0], data...)
	e.at, e.read = at, read
	q.n++
}

// unpush removes the packet pushed last (its event could not be posted).
func (q *audioQueue) unpush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n > 0 {
		q.n--
	}
}

// front returns the oldest packet; its data stays valid until pop.
func (q *audioQueue) front() (audioChunk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return audioChunk{}, false
	}
	return q.ring[q.head], true
}

// pop removes the oldest packet; its buffer is reused by a later push.
func (q *audioQueue) pop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n > 0 {
		q.head = (q.head + 1) % len(q.ring)
		q.n--
	}
}

// ReceiveAudio implements Connection: caller audio (SPEC 17), read now. It does not count
// toward the frame rate limit.
func (c *Client) ReceiveAudio(data []byte) {
	c.ReceiveAudioAt(data, c.session.now())
}

// ReceiveAudioAt implements AudioReceiver: caller audio read at read (the node's clock). The
// data is copied: the transport may reuse it when this returns.
func (c *Client) ReceiveAudioAt(data []byte, read time.Time) {
	if c.closed.Load() || c.role != frames.RoleCaller {
		return
	}
	n := len(data)
	if !c.admit(n) {
		return
	}
	c.audio.push(data, c.session.now(), read)
	if !c.session.post(c.audioEvent) {
		c.audio.unpush()
		c.release(n)
	}
}

// handleAudio is the session event of the oldest queued packet of caller audio: the voice
// side's VAD and the model's input.
func (c *Client) handleAudio() {
	a, ok := c.audio.front()
	if !ok {
		return
	}
	s := c.session
	if !s.ended && c.slot.client == c && s.voice != nil {
		s.voice.CallerAudio(a.data, a.at)
		m := s.node.metrics
		m.audioInDelay.Observe(s.now().Sub(a.read).Seconds())
		m.audioIn.Inc()
	}
	c.audio.pop()
	c.release(len(a.data))
}
