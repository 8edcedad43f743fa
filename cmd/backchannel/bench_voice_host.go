package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// benchHost is the host of one caller's session, over WebSocket in the bench process: it serves
// the deferred tool render_report the voice model calls. Each call is deferred at once, reports
// one milestone (narrated: tool_partial_result with reply) after milestoneAfter and completes
// after doneAfter, so a hand-off, a milestone and a completion are narrated to the caller while
// it keeps talking.
type benchHost struct {
	conn  *frameConn
	step  int
	id    int
	calls atomic.Int64 // tool_call frames
	acks  atomic.Int64 // accepted defers
	// tool_job_narration frames by "kind state" (milestone delivered, completion interrupted, …).
	mu         sync.Mutex
	narrations map[string]int
	timers     []*time.Timer
	done       chan struct{}
}

// Host timings of a job.
const (
	milestoneAfter = time.Second
	doneAfter      = 2500 * time.Millisecond
)

// benchTools is the host's one tool.
var benchTools = []any{map[string]any{"name": "render_report", "description": "Renders a report in the background.",
	"parameters": map[string]any{"type": "object"}, "deferred": true, "deferred_timeout": "1h", "expected_duration": "seconds"}}

// startBenchHost attaches the host to the caller's session and starts serving.
func startBenchHost(ctx context.Context, addr string, c *benchCaller, step int) (*benchHost, error) {
	conn, _, err := dialBench(ctx, addr, map[string]any{"role": "host", "session_id": c.session, "join_token": c.joinToken, "tools": benchTools})
	if err != nil {
		return nil, err
	}
	if _, err := conn.expectType(ctx, "tools.declared"); err != nil {
		conn.close()
		return nil, err
	}
	h := &benchHost{conn: conn, step: step, id: c.id, narrations: map[string]int{}, done: make(chan struct{})}
	go h.serve()
	return h, nil
}

// serve reads the host's frames until the connection ends.
func (h *benchHost) serve() {
	defer close(h.done)
	ctx := context.Background()
	n := 0
	for {
		b, err := h.conn.next(ctx)
		if err != nil {
			return
		}
		var f struct {
			Type     string `json:"type"`
			CallID   string `json:"call_id"`
			Accepted bool   `json:"accepted"`
			Kind     string `json:"kind"`
			State    string `json:"state"`
		}
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Type {
		case "tool_call":
			h.calls.Add(1)
			n++
			handle := fmt.Sprintf("report-%d-%d-%d", h.step, h.id, n)
			_ = h.conn.send(ctx, map[string]any{"type": "tool_deferred", "call_id": f.CallID, "handle": handle, "status_label": "the report"})
			h.later(milestoneAfter, map[string]any{"type": "tool_partial_result", "handle": handle, "reply": true,
				"segment": "the first half of the pages are rendered and the charts are on their way"})
			h.later(doneAfter, map[string]any{"type": "tool_result", "handle": handle,
				"output": map[string]any{"url": fmt.Sprintf("https://reports.example.com/%s.pdf", handle), "pages": 12}})
		case "tool_deferred_ack":
			if f.Accepted {
				h.acks.Add(1)
			}
		case "tool_job_narration":
			h.mu.Lock()
			h.narrations[f.Kind+" "+f.State]++
			h.mu.Unlock()
		}
	}
}

// later sends frame after d.
func (h *benchHost) later(d time.Duration, frame map[string]any) {
	t := time.AfterFunc(d, func() { _ = h.conn.send(context.Background(), frame) })
	h.mu.Lock()
	h.timers = append(h.timers, t)
	h.mu.Unlock()
}

// narrated returns the counts of tool_job_narration frames by "kind state".
func (h *benchHost) narrated() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.narrations))
	for k, v := range h.narrations {
		out[k] = v
	}
	return out
}

func (h *benchHost) close() {
	h.mu.Lock()
	for _, t := range h.timers {
		t.Stop()
	}
	h.mu.Unlock()
	h.conn.close()
	<-h.done
}
