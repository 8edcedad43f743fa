package broker

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestBackpressure: a connection whose frames arrive faster than its session handles them is
// not read further — its reader waits in Receive — once 64 frames (or 4 MiB) of it are queued,
// and goes on when the session catches up, every frame answered in order (SPEC 2; issue 15:
// 296 frames once queued without bound, 463 MiB of RSS). Both bounds are checked: the frame
// count, and the bytes with a lowered MailboxBytes.
func TestBackpressure(t *testing.T) {
	for _, c := range []struct {
		name      string
		limits    Limits
		frameSize int
		want      int // frames queued when the reader is held back
	}{
		{"frames", Limits{FrameBurst: 1 << 20, FramesPerSecond: 1 << 20}, 100, 64},
		// frames of a little over 10 KiB: three fit in 40 KiB, a fourth does not
		{"bytes", Limits{FrameBurst: 1 << 20, FramesPerSecond: 1 << 20, MailboxBytes: 40 << 10}, 10 << 10, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := testNode(t, Config{Limits: c.limits})
			tc, _ := connect(t, n, map[string]any{"api_key": testKey})
			s := tc.c.session
			block := make(chan struct{})
			s.post(func() { <-block }) // the session is busy
			var received atomic.Int64
			const total = 150
			note := strings.Repeat("n", c.frameSize)
			go func() {
				for i := range total {
					tc.send(map[string]any{"type": "tool_progress", "id": fmt.Sprint(i), "handle": "none", "note": note})
					received.Add(1)
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for heldBack(n) == 0 {
				if time.Now().After(deadline) {
					close(block)
					t.Fatalf("the reader was never held back (%d frames taken)", received.Load())
				}
				time.Sleep(time.Millisecond)
			}
			// The reader waits inside Receive of frame want+1: want frames are queued.
			if got := received.Load(); got != int64(c.want) {
				t.Errorf("%d frames taken before the reader was held back, want %d", got, c.want)
			}
			tc.c.backlog.mu.Lock()
			queued, bytes := tc.c.backlog.frames, tc.c.backlog.bytes
			tc.c.backlog.mu.Unlock()
			if queued != c.want || bytes > n.cfg.Limits.MailboxBytes {
				t.Errorf("backlog %d frames, %d bytes, want %d frames within %d bytes", queued, bytes, c.want, n.cfg.Limits.MailboxBytes)
			}
			close(block)
			for i := range total {
				f := tc.next()
				if f["ref"] != fmt.Sprint(i) || f["code"] != "unknown_call" {
					t.Fatalf("answer %d: %v, want unknown_call for frame %d, in order", i, f, i)
				}
			}
		})
	}
}

// heldBack reads the node's count of held-back readers.
func heldBack(n *Node) float64 {
	var m dto.Metric
	if err := n.metrics.heldBack.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
