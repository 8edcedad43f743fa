package broker

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/jobs/memstore"
)

// The voice hot path allocates nothing per 20 ms frame on the scripted model's path (the
// structural half of docs/BENCHMARKS.md "Voice callers per node"): caller audio from the
// transport's read to the model's input, and agent audio from the playout clock to the
// transport. What a speech start or a response costs (timers, the response's frames) is per
// turn, not per frame.

// audioConn is a caller's transport that counts the agent audio frames it is given.
type audioConn struct {
	testConn
	frames atomic.Int64
}

func (a *audioConn) SendAudioDue([]byte, time.Time) { a.frames.Add(1) }

// voiceCaller starts a session of n with a host and a caller whose transport is an audioConn.
func voiceCaller(t *testing.T, n *Node) *audioConn {
	t.Helper()
	_, w := connect(t, n, map[string]any{"role": "host", "api_key": testKey})
	ac := &audioConn{testConn: testConn{t: t, frames: make(chan map[string]any, 1024)}}
	data := []byte(`{"type":"hello","protocol":"backchannel.v1","role":"caller","session_id":"` + w["session_id"].(string) +
		`","join_token":"` + w["join_token"].(string) + `"}`)
	ac.c = localHello(n, ac, data)
	if ac.c == nil || ac.next()["type"] != "welcome" {
		t.Fatal("the caller was not welcomed")
	}
	return ac
}

// handled waits until the client's caller audio has all been handled by its session.
func handled(c *Client) {
	for {
		c.audio.mu.Lock()
		q := c.audio.n
		c.audio.mu.Unlock()
		c.backlog.mu.Lock()
		b := c.backlog.frames
		c.backlog.mu.Unlock()
		if q == 0 && b == 0 {
			return
		}
		runtime.Gosched()
	}
}

func TestCallerAudioAllocs(t *testing.T) {
	n := quietNode(t)
	ac := voiceCaller(t, n)
	c := ac.c
	quiet, loud := g711.Silence(20), g711.Tone(300, 20, 0.5)
	feed := func(f []byte) {
		c.ReceiveAudioAt(f, n.cfg.Clock.Now())
		handled(c)
	}
	for range 50 { // the queue's ring and the mailbox's array reach their size
		feed(quiet)
	}
	if a := testing.AllocsPerRun(500, func() { feed(quiet) }); a > 0.05 {
		t.Errorf("%.2f allocations per frame of silence, want 0", a)
	}
	// A second of speech (a speech start and stop each time: the floor's timers) over 25 loud
	// and 25 quiet frames: what a turn costs, spread over its frames.
	i := 0
	a := testing.AllocsPerRun(500, func() {
		if i++; i%50 < 25 {
			feed(loud)
		} else {
			feed(quiet)
		}
	})
	t.Logf("%.2f allocations per frame of speech with pauses", a)
	if a > 0.1 {
		t.Errorf("%.2f allocations per frame of speech with pauses, want 0 (a turn costs nothing per frame either)", a)
	}
}

// quietNode is a node without its background loops (Node.Run: deadlines, sweeps), whose
// allocations would be counted with the frames'.
func quietNode(t *testing.T) *Node {
	t.Helper()
	n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}}, memstore.New(nil))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx, true)
	})
	return n
}

func TestAgentAudioAllocs(t *testing.T) {
	n := quietNode(t)
	ac := voiceCaller(t, n)
	// The scripted model says 100 words: 6 s of audio, played 20 ms per tick.
	data := []byte(`{"type":"caller.text","text":"say` + strings.Repeat(" word", 100) + `"}`)
	ac.c.Receive(data)
	deadline := time.Now().Add(10 * time.Second)
	wait := func(frames int64) {
		for ac.frames.Load() < frames {
			if time.Now().After(deadline) {
				t.Fatalf("%d agent frames, want %d", ac.frames.Load(), frames)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(10)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f0 := ac.frames.Load()
	wait(f0 + 100)
	runtime.ReadMemStats(&m1)
	f1 := ac.frames.Load()
	per := float64(m1.Mallocs-m0.Mallocs) / float64(f1-f0)
	t.Logf("%.2f allocations per agent frame (%d frames)", per, f1-f0)
	if per > 0.2 {
		t.Errorf("%.2f allocations per agent frame, want 0", per)
	}
}

// tickClock is a Clock whose one ticker delivers the tick times the test sends.
type tickClock struct {
	SystemClock
	c chan time.Time
}

func (tc *tickClock) NewTicker(time.Duration) Ticker { return tc }
func (tc *tickClock) C() <-chan time.Time            { return tc.c }
func (tc *tickClock) Stop()                          {}

// TestPlayoutReplaysDroppedTicks: the playout clock posts one event per tick, plus one for each
// tick its ticker dropped before it (their due times tell), at most maxReplayedTicks at once.
func TestPlayoutReplaysDroppedTicks(t *testing.T) {
	tc := &tickClock{c: make(chan time.Time)}
	n := NewNode(Config{APIKeys: map[string]string{testKey: "tenant-t"}, Clock: tc}, memstore.New(nil))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx, true)
	})
	s := sessionOf(n, "sess_ticks", "tenant-t", time.Now())
	ticks := make(chan struct{}, 64)
	stop := voiceEnv{s}.Every(20*time.Millisecond, func() { ticks <- struct{}{} })
	defer stop()
	t0 := time.Now()
	got := 0
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{20, 1}, {40, 2}, {100, 5}, {120, 6}, {400, 6 + maxReplayedTicks}} {
		tc.c <- t0.Add(c.at * time.Millisecond)
		for ; got < c.want; got++ {
			select {
			case <-ticks:
			case <-time.After(5 * time.Second):
				t.Fatalf("after the tick due at +%dms: %d ticks, want %d", c.at, got, c.want)
			}
		}
	}
	// The session runs its events in order: once this one has run, every tick posted before it
	// has, and none more may be there.
	ran := make(chan struct{})
	s.post(func() { close(ran) })
	<-ran
	if extra := len(ticks); extra != 0 {
		t.Errorf("%d ticks more than %d", extra, got)
	}
}
