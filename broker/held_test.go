package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/internal/redistest"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
)

// gatedJournal is a real journal whose AppendFrames, once armed, waits at the gate until the
// test opens it; it records what each write carried.
type gatedJournal struct {
	cluster.Journal
	mu        sync.Mutex
	armed     bool
	entered   chan struct{} // a write waits at the gate
	open      chan struct{}
	writes    [][]cluster.JournalFrameWrite // since it was armed
	recording bool
}

func (g *gatedJournal) AppendFrames(ctx context.Context, node, tenant, id string, w cluster.JournalWrite) error {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	if g.recording {
		g.writes = append(g.writes, w.Frames)
	}
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.open
	}
	return g.Journal.AppendFrames(ctx, node, tenant, id, w)
}

// arm has the next write wait at the gate, and records the writes from it on.
func (g *gatedJournal) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.recording, g.writes = true, true, nil
}

// gatedNode starts a node on a private Redis whose journal is a gatedJournal (not armed yet),
// in place before the node's loops start.
func gatedNode(t *testing.T) (*Node, *gatedJournal) {
	t.Helper()
	g := &gatedJournal{entered: make(chan struct{}), open: make(chan struct{})}
	opts := redisstore.Options{Client: redistest.New(t), Prefix: redistest.Prefix(t)}
	n, _ := redisNode(t, "a", opts, func(n *Node) { g.Journal, n.journal = n.journal, g })
	return n, g
}

// TestEventsGoOnWhileTheJournalWrites: a journal write runs off the session's loop. While one
// is in flight (held at the gate), the session handles its next events — an agent's call
// makes its job in the store — and their frames wait; once the write is answered, the frames
// of every event that queued behind it go in one write, then out, in order.
func TestEventsGoOnWhileTheJournalWrites(t *testing.T) {
	n, g := gatedNode(t)
	s, host, agent, _ := hostAndAgentCall(t, n, nil)
	g.arm()

	host.send(map[string]any{"type": "job.cancel", "id": "b1", "call_id": "call_00000000000000000000"})
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the answer to b1 was never journaled")
	}
	agent.send(map[string]any{"type": "agent.tool_call", "id": "tc2", "call_id": "a2", "conversation_id": "root", "name": "export", "arguments": map[string]any{"n": 2}})
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		open, err := n.engine.OpenJobs(ctx, s.tenant, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		if len(open) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's second call made no job while a journal write was in flight (%d open): the session waited for the journal", len(open))
		}
	}
	select {
	case f := <-host.frames:
		t.Fatalf("the host got %s before the journal had it", f)
	default:
	}
	close(g.open)
	if f := host.next(); f["ref"] != "b1" {
		t.Fatalf("first after the write: %v, want the answer to b1", f)
	}
	if f := host.next(); f["type"] != "tool_call" {
		t.Fatalf("then: %v, want the tool_call of a2", f)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	carried := false
	if len(g.writes) >= 2 {
		for _, f := range g.writes[1] {
			carried = carried || strings.Contains(string(f.Data), `"type":"tool_call"`)
		}
	}
	if !carried {
		t.Errorf("journal writes: %d, the second carrying %v; want the tool_call made during the gated write in the write right after it", len(g.writes), g.writes[1:])
	}
}

// TestBargeInDropsHeldAudio: agent audio that waits behind a caller's frame the journal does
// not have yet (a write in flight) is dropped when the caller barges in — it is never played
// late, after the caller started speaking.
func TestBargeInDropsHeldAudio(t *testing.T) {
	n, g := gatedNode(t)
	ac := voiceCaller(t, n)
	s := ac.c.session
	g.arm()
	// The turn's echo waits for the gated write; the response's transcript and audio queue
	// behind it.
	ac.c.Receive([]byte(`{"type":"caller.text","text":"say` + strings.Repeat(" word", 50) + `"}`))
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn's echo was never journaled")
	}
	heldAudio := func() int {
		got := make(chan int)
		s.post(func() {
			k := 0
			for _, h := range s.held {
				if h.audio {
					k++
				}
			}
			got <- k
		})
		return <-got
	}
	for deadline := time.Now().Add(10 * time.Second); heldAudio() < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames of agent audio held behind the write, want 5", heldAudio())
		}
	}
	// The caller speaks: 300 ms of a tone (the VAD's speech start).
	tone := g711.Tone(300, 20, 0.5)
	for range 15 {
		ac.c.ReceiveAudioAt(tone, n.cfg.Clock.Now())
	}
	handled(ac.c)
	if k := heldAudio(); k != 0 {
		t.Errorf("after the caller barged in, %d frames of agent audio still wait to be played", k)
	}
	close(g.open)
}
