package backchannel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	backchannel "github.com/backchannel-io/backchannel/sdk/go"
)

// exportTool is a deferred tool "export" whose handler defers each call under "export-" and
// its call id, with label, and hands the job to jobs.
func exportTool(jobs chan<- *backchannel.Job, label string) backchannel.Tool {
	return tool("export", true, func(ctx context.Context, call *backchannel.Call) (any, error) {
		job, err := call.Defer(ctx, "export-"+call.CallID, label)
		if err != nil {
			return nil, err
		}
		jobs <- job
		return nil, nil
	})
}

// fastBackoff retries every 100 ms: the test broker's resume window is 3 s.
func fastBackoff() backoff.BackOff { return backoff.NewConstantBackOff(100 * time.Millisecond) }

// counter counts handler runs per call id.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
}

func (c *counter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// seqOf returns a server frame's seq.
func seqOf(t *testing.T, f frames.Frame) int64 {
	data, err := frames.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Seq int64 }
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Seq
}

// TestReconnect cuts the host's TCP connection and keeps it away while the agent makes a
// call and cancels a job: after the resume the call's handler runs once, the cancel reaches
// the job, a request made while away is sent, and no seq is processed twice.
func TestReconnect(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		g := newGate(t)
		jobs := make(chan *backchannel.Job, 2)
		runs := &counter{}
		var evMu sync.Mutex
		var seqs []int64
		var kinds []backchannel.EventKind
		dropped, resumed := make(chan struct{}, 1), make(chan struct{}, 1)
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, HTTPClient: g.client(), Backoff: fastBackoff,
			OnEvent: func(ev backchannel.Event) {
				evMu.Lock()
				defer evMu.Unlock()
				kinds = append(kinds, ev.Kind)
				switch ev.Kind {
				case backchannel.EventFrame:
					seqs = append(seqs, seqOf(t, ev.Frame))
				case backchannel.EventDropped:
					dropped <- struct{}{}
				case backchannel.EventResumed:
					resumed <- struct{}{}
				}
			},
			Tools: []backchannel.Tool{
				exportTool(jobs, "exporting"),
				tool("lookup", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
					runs.add(call.CallID)
					var args struct{ Q string }
					_ = json.Unmarshal(call.Arguments, &args)
					return "looked up " + args.Q, nil
				}),
			}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		ctx := ctxT(t)

		a.call("c1", "export", map[string]any{})
		job1 := recv(t, "job 1", jobs)
		a.call("c2", "export", map[string]any{})
		job2 := recv(t, "job 2", jobs)

		// The network goes down: the host's connection is reset and it cannot dial.
		g.set("refuse")
		g.cut()
		recv(t, "dropped event", dropped)

		// While it is away, the agent calls a tool of the host and cancels job 1.
		a.call("c3", "lookup", map[string]string{"Q": "opening hours"})
		a.call("k1", "cancel", map[string]string{"tool_call_id": "c1"})
		if r := a.final("k1"); r.Content != "Tool cancellation requested" {
			t.Fatalf("cancel while the host is away: %q", r.Content)
		}
		// A request made while away waits for the resume.
		progress := make(chan error, 1)
		go func() { progress <- job2.Progress(ctx, "still exporting") }()
		select {
		case err := <-progress:
			t.Fatalf("Progress returned while the host was away: %v", err)
		case <-time.After(300 * time.Millisecond):
		}

		g.set("")
		recv(t, "resumed event", resumed)
		closed(t, "job 1 cancelled after the resume", job1.Cancelled())
		if job1.CancelReason() != frames.CancelAgentRequest {
			t.Errorf("job 1 reason %q", job1.CancelReason())
		}
		if err := recv(t, "progress sent after the resume", progress); err != nil {
			t.Errorf("Progress after the resume: %v", err)
		}
		if r := a.final("c3"); r.Content != "looked up opening hours" {
			t.Errorf("c3: %q", r.Content)
		}
		if err := job2.Result(ctx, "exported"); err != nil {
			t.Fatalf("Result after the resume: %v", err)
		}
		if r := a.waitResult("w2", "c2"); r.Content != "exported" {
			t.Errorf("c2 through wait: %q", r.Content)
		}

		// A frame the host has processed is dropped when it comes again.
		last := backchannel.LastSeq(h)
		if last < 3 {
			t.Fatalf("LastSeq %d", last)
		}
		dup, _ := frames.Encode(&frames.ToolCall{Reply: frames.Reply{Seq: last}, CallID: "call_duplicateduplicate1", Name: "lookup",
			Arguments: json.RawMessage(`{}`), TimeoutMS: 10000, SessionID: h.SessionID()})
		backchannel.Receive(h, dup)
		if err := h.Inject(ctx, "sync", false); codeOf(err) != frames.CodeInjectRejected {
			t.Errorf("Inject: %v", err) // a round trip, so a wrongly started handler would have run
		}
		time.Sleep(50 * time.Millisecond)
		if n := runs.get("call_duplicateduplicate1"); n != 0 {
			t.Errorf("a frame with an old seq ran a handler %d times", n)
		}
		for id, n := range runs.n {
			if n != 1 {
				t.Errorf("handler of %s ran %d times", id, n)
			}
		}

		evMu.Lock()
		defer evMu.Unlock()
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("events out of seq order or repeated: %v", seqs)
				break
			}
		}
		if len(kinds) < 3 || kinds[0] != backchannel.EventConnected {
			t.Errorf("events: %v", kinds)
		}
	})
}

// TestStateFileRestart runs a host with a state file, kills it (its transport is reset and it
// never comes back, and it is not closed), and starts a new Host from the same file: it
// resumes the slot, gets the deferred job through OnResume and finishes it by handle, and
// receives the call the agent made while no host was there.
func TestStateFileRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		dir := t.TempDir()
		path := filepath.Join(dir, "host.json")
		handle := "render-" + filepath.Base(t.Name())
		jobs := make(chan *backchannel.Job, 1)
		render := func(prefix string) backchannel.Tool {
			return tool("render_report", true, func(ctx context.Context, call *backchannel.Call) (any, error) {
				var args struct{ Quick bool }
				_ = json.Unmarshal(call.Arguments, &args)
				if args.Quick {
					return prefix + " rendered it at once", nil
				}
				job, err := call.Defer(ctx, handle, "rendering")
				if err != nil {
					return nil, err
				}
				jobs <- job
				return nil, nil
			})
		}
		g := newGate(t)
		first := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, StateFile: path,
			HTTPClient: g.client(), Backoff: fastBackoff, Tools: []backchannel.Tool{render("first")}})
		a := newAgent(t, b, first.SessionID(), first.JoinToken())
		ctx := ctxT(t)
		a.call("c1", "render_report", map[string]any{})
		job := recv(t, "job", jobs)
		a.result("c1", frames.ResultKindBackgroundPlaceholder)
		if err := job.Progress(ctx, "page 1"); err != nil {
			t.Fatal(err)
		}

		// Wait until the file holds everything the first host processed (the file is saved at
		// least every second), then the process "dies".
		deadline := time.Now().Add(waitLimit)
		for {
			data, err := os.ReadFile(path)
			var st struct {
				SessionID string `json:"session_id"`
				LastSeq   int64  `json:"last_seq"`
			}
			if err == nil && json.Unmarshal(data, &st) == nil && st.SessionID == first.SessionID() && st.LastSeq == backchannel.LastSeq(first) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("state file never caught up: %s %v", data, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		g.set("hold")
		g.cut()
		stale, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}

		// With no host attached, the agent calls the tool again: the call waits in the slot.
		a.call("c2", "render_report", map[string]bool{"Quick": true})

		resumedJobs := make(chan *backchannel.Job, 1)
		infos := make(chan frames.ResumedJob, 1)
		second := connect(t, backchannel.Options{URL: b.URL, StateFile: path, Tools: []backchannel.Tool{render("second")},
			OnResume: func(ctx context.Context, job *backchannel.Job, info frames.ResumedJob) {
				infos <- info
				resumedJobs <- job
			}})
		if second.SessionID() != first.SessionID() || second.JoinToken() != first.JoinToken() {
			t.Errorf("resumed session %s (join token %q), want %s", second.SessionID(), second.JoinToken(), first.SessionID())
		}
		rj := recv(t, "resumed job", resumedJobs)
		info := recv(t, "resumed job info", infos)
		if rj.Handle != handle || rj.CallID != job.CallID || rj.Name != "render_report" || rj.StatusLabel != "rendering" ||
			!rj.Deadline.Equal(job.Deadline) || info.State != frames.StateDeferred {
			t.Errorf("resumed job %+v (%+v), want handle %s of %s", rj, info, handle, job.CallID)
		}
		if r := a.final("c2"); r.Content != "second rendered it at once" {
			t.Errorf("c2: %q", r.Content)
		}
		if err := rj.Result(ctx, "rendered after the restart"); err != nil {
			t.Fatalf("Result by handle after the restart: %v", err)
		}
		if r := a.waitResult("w1", "c1"); r.Content != "rendered after the restart" {
			t.Errorf("c1 through wait: %q", r.Content)
		}

		// The first process's token was used by the second: a third process with that stale
		// file is refused with resume_invalid, and the dead file is removed.
		stalePath := filepath.Join(dir, "stale.json")
		if err := os.WriteFile(stalePath, stale, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = backchannel.Connect(ctx, backchannel.Options{URL: b.URL, StateFile: stalePath, Logger: testLogger()})
		if codeOf(err) != frames.CodeResumeInvalid {
			t.Errorf("Connect with a used token: %v, want resume_invalid", err)
		}
		if _, err := os.Stat(stalePath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dead state file is still there: %v", err)
		}
	})
}

// timeline returns the kinds of the session's timeline entries, with their handles.
func timeline(t *testing.T, b *brokertest.Broker, sessionID string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", b.URL+"/v1/sessions/"+sessionID+"/timeline", nil)
	req.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("timeline: %v", err)
	}
	defer resp.Body.Close()
	var v struct {
		Entries []struct {
			Kind   string `json:"kind"`
			Handle string `json:"handle"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	var out []string
	for _, e := range v.Entries {
		out = append(out, e.Kind+" "+e.Handle)
	}
	return out
}

// waitTimeline waits until the timeline has entry ("KIND HANDLE").
func waitTimeline(t *testing.T, b *brokertest.Broker, sessionID, entry string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !slices.Contains(timeline(t, b, sessionID), entry) {
		if time.Now().After(deadline) {
			t.Fatalf("no timeline entry %q: %v", entry, timeline(t, b, sessionID))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAnswersLostInDrop: the broker applies a job.cancel and a tool_result, but the transport
// drops before the host reads their answers. After the resume the replayed answers settle
// both requests — neither is sent again (a second cancel would answer already_canceled, a
// second result would be recorded as late_result_dropped).
func TestAnswersLostInDrop(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		g := newGate(t)
		jobs := make(chan *backchannel.Job, 2)
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, HTTPClient: g.client(), Backoff: fastBackoff,
			Tools: []backchannel.Tool{exportTool(jobs, "")}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		ctx := ctxT(t)
		a.call("c1", "export", map[string]any{})
		cancelled := recv(t, "job 1", jobs)
		a.call("c2", "export", map[string]any{})
		finished := recv(t, "job 2", jobs)

		g.freeze()
		cancelRes := make(chan frames.CancelResult, 1)
		resultErr := make(chan error, 1)
		go func() {
			res, err := h.CancelJob(ctx, cancelled.Handle)
			if err != nil {
				t.Errorf("CancelJob: %v", err)
			}
			cancelRes <- res
		}()
		go func() { resultErr <- finished.Result(ctx, "exported") }()
		waitTimeline(t, b, h.SessionID(), "cancel "+cancelled.Handle)
		waitTimeline(t, b, h.SessionID(), "result "+finished.Handle)
		g.cut()
		g.unfreeze()

		if res := recv(t, "cancel result", cancelRes); res != frames.CancelResultCancelled {
			t.Errorf("CancelJob after the drop: %s, want cancelled (a resend would be already_canceled)", res)
		}
		if err := recv(t, "result outcome", resultErr); err != nil {
			t.Errorf("Result after the drop: %v", err)
		}
		closed(t, "job 1 cancelled", cancelled.Cancelled())
		if cancelled.CancelReason() != frames.CancelHostRequest {
			t.Errorf("reason %q", cancelled.CancelReason())
		}
		if r := a.waitResult("w2", "c2"); r.Content != "exported" {
			t.Errorf("c2: %q", r.Content)
		}
		for _, e := range timeline(t, b, h.SessionID()) {
			if strings.HasPrefix(e, "late_result_dropped") || strings.HasPrefix(e, "duplicate_cancel") {
				t.Errorf("a request was applied twice: %s", e)
			}
		}
	})
}

// TestFramesLostInDrop: frames written just before a drop never reach the broker. After the
// resume, the host knows they were not applied and sends them again — except a milestone,
// which cannot be told apart from one applied without its confirmation and would be narrated
// twice: it fails with ErrUnconfirmed.
func TestFramesLostInDrop(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		g := newGate(t)
		jobs := make(chan *backchannel.Job, 4)
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, HTTPClient: g.client(), Backoff: fastBackoff,
			Tools: []backchannel.Tool{exportTool(jobs, "")}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		ctx := ctxT(t)
		var js []*backchannel.Job
		for _, id := range []string{"c1", "c2", "c3", "c4"} {
			a.call(id, "export", map[string]any{})
			js = append(js, recv(t, "job", jobs))
		}

		g.loseWrites(true)
		cancelRes := make(chan frames.CancelResult, 1)
		go func() {
			res, err := h.CancelJob(ctx, js[0].Handle)
			if err != nil {
				t.Errorf("CancelJob: %v", err)
			}
			cancelRes <- res
		}()
		result := make(chan error, 1)
		go func() { result <- js[1].Result(ctx, "exported") }()
		milestone := make(chan error, 1)
		go func() { milestone <- js[2].Milestone(ctx, "half way") }()
		progress := make(chan error, 1)
		go func() { progress <- js[3].Progress(ctx, "still going") }()
		deadline := time.Now().Add(waitLimit)
		for {
			queued, written := backchannel.Requests(h)
			if queued == 0 && written == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("requests not written: %d queued, %d written", queued, written)
			}
			time.Sleep(10 * time.Millisecond)
		}
		g.set("refuse") // the new connection must not lose its hello
		g.cut()
		g.loseWrites(false)
		g.set("")

		if res := recv(t, "cancel result", cancelRes); res != frames.CancelResultCancelled {
			t.Errorf("CancelJob: %s, want cancelled", res)
		}
		if err := recv(t, "result", result); err != nil {
			t.Errorf("Result: %v", err)
		}
		if err := recv(t, "progress", progress); err != nil {
			t.Errorf("Progress: %v", err)
		}
		if err := recv(t, "milestone", milestone); !errors.Is(err, backchannel.ErrUnconfirmed) {
			t.Errorf("Milestone: %v, want ErrUnconfirmed", err)
		}
		closed(t, "job 1 cancelled", js[0].Cancelled())
		if r := a.waitResult("w2", "c2"); r.Content != "exported" {
			t.Errorf("c2: %q", r.Content)
		}
		entries := timeline(t, b, h.SessionID())
		count := func(entry string) int {
			n := 0
			for _, e := range entries {
				if e == entry {
					n++
				}
			}
			return n
		}
		if count("cancel "+js[0].Handle) != 1 || count("result "+js[1].Handle) != 1 || count("progress "+js[3].Handle) != 1 {
			t.Errorf("each resent frame must be applied once: %v", entries)
		}
		if count("partial "+js[2].Handle) != 0 {
			t.Errorf("the lost milestone was applied: %v", entries)
		}
	})
}

// TestStaleStateFile: a process dies before its state file caught up, so the new one resumes
// from an older last_seq and the broker replays tool_calls the old process had already
// deferred. A handler that derives its handle from the call id defers again, is accepted again
// and owns the job; one that picks a new handle is refused, and the job goes to OnResume
// instead. Either way each job has one worker and its result reaches the agent.
func TestStaleStateFile(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		dir := t.TempDir()
		path := filepath.Join(dir, "host.json")
		type deferred struct {
			stable bool
			job    *backchannel.Job
			err    error
		}
		var n atomic.Int32
		render := func(out chan<- deferred) backchannel.Tool {
			return tool("render_report", true, func(ctx context.Context, call *backchannel.Call) (any, error) {
				var args struct{ Stable bool }
				_ = json.Unmarshal(call.Arguments, &args)
				handle := "stable-" + call.CallID[len("call_"):]
				if !args.Stable {
					handle = fmt.Sprintf("random-%d-%s", n.Add(1), call.CallID[len("call_"):])
				}
				job, err := call.Defer(ctx, handle, "")
				out <- deferred{args.Stable, job, err}
				return nil, err
			})
		}
		g := newGate(t)
		firstJobs := make(chan deferred, 2)
		first := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, StateFile: path,
			HTTPClient: g.client(), Backoff: fastBackoff, Tools: []backchannel.Tool{render(firstJobs)}})
		early, err := os.ReadFile(path) // saved after the welcome, before any call
		if err != nil {
			t.Fatal(err)
		}
		a := newAgent(t, b, first.SessionID(), first.JoinToken())
		a.call("c1", "render_report", map[string]bool{"Stable": true})
		a.call("c2", "render_report", map[string]bool{"Stable": false})
		d1, d2 := recv(t, "first defer", firstJobs), recv(t, "second defer", firstJobs)
		if d1.err != nil || d2.err != nil {
			t.Fatalf("defers: %v %v", d1.err, d2.err)
		}
		if !d1.stable {
			d1, d2 = d2, d1
		}
		g.set("hold")
		g.cut()

		stalePath := filepath.Join(dir, "stale.json")
		if err := os.WriteFile(stalePath, early, 0o600); err != nil {
			t.Fatal(err)
		}
		secondJobs := make(chan deferred, 2)
		resumed := make(chan *backchannel.Job, 2)
		connect(t, backchannel.Options{URL: b.URL, StateFile: stalePath, Tools: []backchannel.Tool{render(secondJobs)},
			OnResume: func(ctx context.Context, job *backchannel.Job, info frames.ResumedJob) { resumed <- job }})
		ctx := ctxT(t)
		stable, random := recv(t, "replayed defer", secondJobs), recv(t, "replayed defer", secondJobs)
		if !stable.stable {
			stable, random = random, stable
		}
		if stable.err != nil || stable.job == nil || stable.job.Handle != d1.job.Handle {
			t.Fatalf("the stable handle's defer again: %+v", stable)
		}
		var re *backchannel.DeferRejectedError
		if !errors.As(random.err, &re) || re.Reason != frames.AckCallNotPending {
			t.Fatalf("a new handle for a deferred call: %v", random.err)
		}
		rj := recv(t, "job through OnResume", resumed)
		if rj.CallID != d2.job.CallID || rj.Handle != d2.job.Handle {
			t.Errorf("OnResume got %s/%s, want %s/%s", rj.CallID, rj.Handle, d2.job.CallID, d2.job.Handle)
		}
		select {
		case j := <-resumed:
			t.Errorf("a second job went to OnResume: %s", j.Handle)
		case <-time.After(100 * time.Millisecond):
		}
		if err := stable.job.Result(ctx, "stable done"); err != nil {
			t.Fatal(err)
		}
		if err := rj.Result(ctx, "random done"); err != nil {
			t.Fatal(err)
		}
		if r := a.waitResult("w1", "c1"); r.Content != "stable done" {
			t.Errorf("c1: %q", r.Content)
		}
		if r := a.waitResult("w2", "c2"); r.Content != "random done" {
			t.Errorf("c2: %q", r.Content)
		}
	})
}

// TestMissedPings: a connection that delivers nothing — not even the broker's pings — is
// dropped after two heartbeats and a half, and the host resumes once the network is back.
func TestMissedPings(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{Heartbeat: 200 * time.Millisecond}})
			g := newGate(t)
			events := make(chan backchannel.Event, 16)
			h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, HTTPClient: g.client(), Backoff: fastBackoff,
				OnEvent: func(ev backchannel.Event) { events <- ev }})
			next := func(kind backchannel.EventKind) backchannel.Event {
				t.Helper()
				for {
					ev := recv(t, string(kind)+" event", events)
					if ev.Kind == kind {
						return ev
					}
				}
			}
			next(backchannel.EventConnected)
			start := time.Now()
			g.freeze()
			next(backchannel.EventDropped)
			if d := time.Since(start); d < 400*time.Millisecond {
				t.Errorf("dropped after %s, before two heartbeats", d)
			}
			g.unfreeze()
			next(backchannel.EventResumed)
			if err := h.Inject(ctxT(t), "still there?", false); codeOf(err) != frames.CodeInjectRejected {
				t.Errorf("a request after the resume: %v", err)
			}
		})
	}
}

// stateHost connects a host that creates a session, dials through g, keeps its state in path
// and reconnects with policy; the channel gets the Err of its EventStopped event.
func stateHost(t *testing.T, b *brokertest.Broker, g *gate, path string, policy func() backoff.BackOff) (*backchannel.Host, <-chan error) {
	t.Helper()
	stopped := make(chan error, 1)
	h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, HTTPClient: g.client(), Backoff: policy,
		StateFile: path, OnEvent: func(ev backchannel.Event) {
			if ev.Kind == backchannel.EventStopped {
				stopped <- ev.Err
			}
		}})
	return h, stopped
}

// TestResumeExpired: a host kept away longer than the resume window is refused with
// resume_expired when it comes back; it stops with that error, reports it, and removes its
// state file.
func TestResumeExpired(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		path := filepath.Join(t.TempDir(), "host.json")
		g := newGate(t)
		h, stopped := stateHost(t, b, g, path, fastBackoff)
		newAgent(t, b, h.SessionID(), h.JoinToken()) // keeps the session alive
		g.set("refuse")
		g.cut()
		time.Sleep(3500 * time.Millisecond) // the test broker's resume window is 3 s
		g.set("")
		closed(t, "Done", h.Done())
		if codeOf(h.Err()) != frames.CodeResumeExpired {
			t.Errorf("Err: %v, want resume_expired", h.Err())
		}
		if err := recv(t, "stopped event", stopped); codeOf(err) != frames.CodeResumeExpired {
			t.Errorf("stopped event: %v", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state file of an expired slot: %v", err)
		}
		if _, err := h.CancelJob(ctxT(t), "x"); codeOf(err) != frames.CodeResumeExpired {
			t.Errorf("a request after the stop: %v", err)
		}
	})
}

// TestGiveUpResuming: with the default policy a host that cannot reach the broker retries with
// growing waits (SPEC 15) and gives up once the resume window of its welcome has passed (SPEC
// 10; the test broker's is 3 s): it stops with an error that says so and wraps the last
// failure, and keeps its state file — the slot may still be resumable by a later process.
func TestGiveUpResuming(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		path := filepath.Join(t.TempDir(), "host.json")
		g := newGate(t)
		h, stopped := stateHost(t, b, g, path, nil) // the default reconnect policy
		g.set("refuse")
		start := time.Now()
		g.cut()
		closed(t, "Done", h.Done())
		took := time.Since(start)
		err := h.Err()
		if err == nil || !strings.Contains(err.Error(), "gave up resuming") || !strings.Contains(err.Error(), "test gate: network down") {
			t.Errorf("Err: %v, want the give-up wrapping the last dial error", err)
		}
		if ev := recv(t, "stopped event", stopped); ev != err {
			t.Errorf("stopped event: %v, want Err %v", ev, err)
		}
		// 250 ms doubling, ± 50 %, within 3 s: a handful of attempts, not a tight loop.
		if n := g.refused.Load(); n < 3 || n > 8 {
			t.Errorf("%d reconnect attempts in %s: want exponential backoff (250 ms doubling) bounded by the 3 s window", n, took)
		}
		if took > 4*time.Second {
			t.Errorf("gave up after %s: the resume window is 3 s", took)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("the state file of a slot that may still be resumable: %v", err)
		}
	})
}
