package backchannel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	backchannel "github.com/backchannel-io/backchannel/sdk/go"
)

// TestAnswerAtOnce: a handler's output and its error reach the agent as the call's result.
func TestAnswerAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, Tools: []backchannel.Tool{
			tool("lookup", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
				var args struct{ City string }
				if err := json.Unmarshal(call.Arguments, &args); err != nil {
					return nil, err
				}
				return map[string]any{"city": args.City, "temp_c": 21}, nil
			}),
			tool("broken", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
				return nil, errors.New("the weather service is down")
			}),
			tool("greet", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
				return "hello there", nil
			}),
		}})
		if h.SessionID() == "" || h.JoinToken() == "" {
			t.Fatalf("a created session needs an id and a join token: %q %q", h.SessionID(), h.JoinToken())
		}
		a := newAgent(t, b, h.SessionID(), h.JoinToken())

		a.call("c1", "lookup", map[string]string{"City": "Oslo"})
		if r := a.final("c1"); r.Kind != frames.ResultKindResult || r.Content != `{"city":"Oslo","temp_c":21}` {
			t.Errorf("lookup result: %s %q", r.Kind, r.Content)
		}
		a.call("c2", "broken", map[string]any{})
		if r := a.final("c2"); r.Kind != frames.ResultKindError || r.Content != "error: the weather service is down" {
			t.Errorf("broken result: %s %q", r.Kind, r.Content)
		}
		a.call("c3", "greet", map[string]any{})
		if r := a.final("c3"); r.Content != "hello there" {
			t.Errorf("greet result: %q", r.Content)
		}
	})
}

// TestDeferredJob: a deferred call is accepted with its deadline; progress, a milestone, a
// partial result, an ask answered by the agent and interaction updates are applied; the
// result by handle reaches the agent through wait.
func TestDeferredJob(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		jobs := make(chan *backchannel.Job, 1)
		handle := "report-" + t.Name()
		render := tool("render_report", true, func(ctx context.Context, call *backchannel.Call) (any, error) {
			if !call.Deferrable || call.Timeout != 10*time.Second {
				t.Errorf("call: deferrable %v, timeout %s", call.Deferrable, call.Timeout)
			}
			job, err := call.Defer(ctx, handle, "rendering the report")
			if err != nil {
				return nil, err
			}
			jobs <- job
			return nil, nil
		})
		render.Decl.DeferredTimeout = frames.Duration(time.Hour)
		h := connect(t, backchannel.Options{URL: b.WSURL, APIKey: brokertest.KeyA, Tools: []backchannel.Tool{render}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		ctx := ctxT(t)

		start := time.Now()
		a.call("c1", "render_report", map[string]string{"month": "may"})
		job := recv(t, "deferred job", jobs)
		if job.Handle != handle || job.Name != "render_report" || job.StatusLabel != "rendering the report" || string(job.Arguments) != `{"month":"may"}` {
			t.Errorf("job: %+v", job)
		}
		if lo, hi := start.Add(time.Hour-time.Second), time.Now().Add(time.Hour+time.Second); job.Deadline.Before(lo) || job.Deadline.After(hi) {
			t.Errorf("deadline %s, want about an hour from now", job.Deadline)
		}
		if r := a.result("c1", frames.ResultKindBackgroundPlaceholder); !strings.Contains(r.Content, "running in the background") {
			t.Errorf("placeholder: %q", r.Content)
		}

		if err := job.Progress(ctx, "fetching data"); err != nil {
			t.Fatalf("Progress: %v", err)
		}
		if err := job.Milestone(ctx, "page 1 of 2 rendered"); err != nil {
			t.Fatalf("Milestone: %v", err)
		}
		if err := job.Partial(ctx, map[string]int{"pages": 2}, "layout"); err != nil {
			t.Fatalf("Partial: %v", err)
		}

		// An ask reaches the agent as a prompt; its answer reaches the job.
		id, err := job.Ask(ctx, frames.Interaction{Prompt: "Which format?", Options: []string{"pdf", "html"}})
		if err != nil || !strings.HasPrefix(id, "ia_") {
			t.Fatalf("Ask: %q %v", id, err)
		}
		p := a.waitFor("interaction prompt", func(f frames.Frame) bool {
			p, ok := f.(*frames.AgentPrompt)
			return ok && strings.Contains(p.Text, id)
		}).(*frames.AgentPrompt)
		if want := fmt.Sprintf("Tool call `c1` asks (%s): Which format?\nOptions: pdf, html", id); p.Text != want {
			t.Errorf("prompt %q, want %q", p.Text, want)
		}
		a.send(&frames.AgentInteractionAnswer{ConversationID: "root", InteractionID: id, Option: "pdf", Text: "pdf please"})
		ans := recv(t, "interaction answer", job.Answers())
		if ans.InteractionID != id || ans.Option != "pdf" || ans.Text != "pdf please" {
			t.Errorf("answer: %+v", ans)
		}
		if res, err := job.UpdateInteraction(ctx, id, frames.InteractionResolved); err != nil || res != frames.UpdateAlreadyClosed {
			t.Errorf("update of an answered interaction: %s %v", res, err)
		}
		id2, err := job.Ask(ctx, frames.Interaction{ID: "ia_second", Prompt: "Add a cover page?"})
		if err != nil || id2 != "ia_second" {
			t.Fatalf("second Ask: %q %v", id2, err)
		}
		if res, err := job.UpdateInteraction(ctx, id2, frames.InteractionCancelled); err != nil || res != frames.UpdateApplied {
			t.Errorf("first update: %s %v", res, err)
		}
		if res, err := job.UpdateInteraction(ctx, id2, frames.InteractionCancelled); err != nil || res != frames.UpdateAlreadyClosed {
			t.Errorf("second update: %s %v", res, err)
		}

		if err := job.Result(ctx, map[string]string{"url": "https://example.com/may.pdf"}); err != nil {
			t.Fatalf("Result: %v", err)
		}
		closed(t, "job context after Result", job.Context().Done())
		if _, ok := <-job.Answers(); ok {
			t.Errorf("Answers still open after the job ended")
		}
		if r := a.waitResult("w1", "c1"); r.Kind != frames.ResultKindResult || r.Content != `{"url":"https://example.com/may.pdf"}` {
			t.Errorf("waited result: %s %q", r.Kind, r.Content)
		}
		// The job is over: another result is refused with call_finished.
		if err := job.Fail(ctx, "too late"); codeOf(err) != frames.CodeCallFinished {
			t.Errorf("a second result: %v, want call_finished", err)
		}
	})
}

// TestDeferRejected: rejected defers come back as *DeferRejectedError with the broker's
// reason, and the call stays pending so that the handler can still answer it.
func TestDeferRejected(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		handle := "shared-" + t.Name()
		type outcome struct {
			job *backchannel.Job
			err error
		}
		outcomes := make(chan outcome, 4)
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, Tools: []backchannel.Tool{
			tool("slow", true, func(ctx context.Context, call *backchannel.Call) (any, error) {
				var args struct{ Handle string }
				_ = json.Unmarshal(call.Arguments, &args)
				job, err := call.Defer(ctx, args.Handle, "")
				outcomes <- outcome{job, err}
				if err != nil {
					return "answered at once after: " + err.Error(), nil
				}
				return nil, nil
			}),
			tool("quick", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
				_, err := call.Defer(ctx, "quick-"+t.Name(), "")
				outcomes <- outcome{nil, err}
				return "quick answer", nil
			}),
		}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		ctx := ctxT(t)
		reason := func(err error) frames.DeferAckReason {
			var re *backchannel.DeferRejectedError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *DeferRejectedError", err)
			}
			return re.Reason
		}

		// A handle of the form of a broker call id is reserved.
		a.call("c1", "slow", map[string]string{"Handle": "call_abcdefghij234567abcd"})
		if o := recv(t, "defer outcome", outcomes); reason(o.err) != frames.AckHandleReserved {
			t.Errorf("reserved handle: %v", o.err)
		}
		if r := a.final("c1"); !strings.HasPrefix(r.Content, "answered at once after: ") {
			t.Errorf("c1 after a rejected defer: %q", r.Content)
		}

		// A handle held by an open job is in use; once that job ended it is burned.
		a.call("c2", "slow", map[string]string{"Handle": handle})
		first := recv(t, "defer outcome", outcomes)
		if first.err != nil {
			t.Fatalf("first defer: %v", first.err)
		}
		a.call("c3", "slow", map[string]string{"Handle": handle})
		if o := recv(t, "defer outcome", outcomes); reason(o.err) != frames.AckHandleInUse {
			t.Errorf("handle in use: %v", o.err)
		}
		a.final("c3")
		if err := first.job.Result(ctx, "done"); err != nil {
			t.Fatal(err)
		}
		a.call("c4", "slow", map[string]string{"Handle": handle})
		if o := recv(t, "defer outcome", outcomes); reason(o.err) != frames.AckHandleBurned {
			t.Errorf("burned handle: %v", o.err)
		}
		a.final("c4")

		// A tool not declared deferred cannot be deferred; an empty handle is invalid.
		a.call("c5", "quick", map[string]any{})
		if o := recv(t, "defer outcome", outcomes); reason(o.err) != frames.AckNotDeferrable {
			t.Errorf("not deferrable: %v", o.err)
		}
		if r := a.final("c5"); r.Content != "quick answer" {
			t.Errorf("c5: %q", r.Content)
		}
		a.call("c6", "slow", map[string]string{"Handle": ""})
		if o := recv(t, "defer outcome", outcomes); reason(o.err) != frames.AckInvalidHandle {
			t.Errorf("empty handle: %v", o.err)
		}
		a.final("c6")
	})
}

// TestCancel: the agent's cancel of a deferred job reaches job.Cancelled with agent_request;
// a cancel of a call still in its handler cancels the handler's context; the host's own
// CancelJob answers with its result and cancels with host_request.
func TestCancel(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		jobs := make(chan *backchannel.Job, 2)
		causes := make(chan error, 1)
		var n atomic.Int32
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, Tools: []backchannel.Tool{
			tool("export", true, func(ctx context.Context, call *backchannel.Call) (any, error) {
				job, err := call.Defer(ctx, fmt.Sprintf("export-%d-%s", n.Add(1), t.Name()), "exporting")
				if err != nil {
					return nil, err
				}
				jobs <- job
				return nil, nil
			}),
			tool("block", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return "ignored", nil
			}),
		}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		ctx := ctxT(t)

		a.call("c1", "export", map[string]any{})
		job := recv(t, "job", jobs)
		a.result("c1", frames.ResultKindBackgroundPlaceholder)
		a.call("k1", "cancel", map[string]string{"tool_call_id": "c1"})
		if r := a.final("k1"); r.Content != "Tool cancellation requested" {
			t.Errorf("cancel: %q", r.Content)
		}
		closed(t, "job.Cancelled", job.Cancelled())
		if job.CancelReason() != frames.CancelAgentRequest {
			t.Errorf("reason %q, want agent_request", job.CancelReason())
		}
		var ce *backchannel.CancelledError
		if !errors.As(context.Cause(job.Context()), &ce) || ce.Reason != frames.CancelAgentRequest {
			t.Errorf("job context cause: %v", context.Cause(job.Context()))
		}
		if err := job.Result(ctx, "too late"); codeOf(err) != frames.CodeCallFinished {
			t.Errorf("result after cancel: %v, want call_finished", err)
		}
		if r := a.waitResult("w1", "c1"); r.Content != "error: Tool call canceled" {
			t.Errorf("cancelled call through wait: %q", r.Content)
		}

		// A call in its handler: its context is cancelled with the reason.
		a.call("c2", "block", map[string]any{})
		a.result("c2", frames.ResultKindBackgroundPlaceholder)
		a.call("k2", "cancel", map[string]string{"tool_call_id": "c2"})
		a.final("k2")
		if err := recv(t, "handler cause", causes); !errors.As(err, &ce) || ce.Reason != frames.CancelAgentRequest {
			t.Errorf("handler cause: %v", err)
		}

		// The host cancels its own job by handle.
		a.call("c3", "export", map[string]any{})
		job3 := recv(t, "job", jobs)
		if res, err := h.CancelJob(ctx, job3.Handle); err != nil || res != frames.CancelResultCancelled {
			t.Fatalf("CancelJob: %s %v", res, err)
		}
		closed(t, "job3.Cancelled", job3.Cancelled())
		if job3.CancelReason() != frames.CancelHostRequest {
			t.Errorf("reason %q, want host_request", job3.CancelReason())
		}
		if res, err := h.CancelJob(ctx, job3.CallID); err != nil || res != frames.CancelResultAlreadyCanceled {
			t.Errorf("second CancelJob by call id: %s %v", res, err)
		}
		if res, err := h.CancelJob(ctx, "no-such-handle"); err != nil || res != frames.CancelResultUnknownCall {
			t.Errorf("CancelJob of an unknown handle: %s %v", res, err)
		}
	})
}

// TestBrokerErrors: errors of the broker come back from the request that caused them.
func TestBrokerErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA})
		ctx := ctxT(t)
		err := h.Declare(ctx, tool("wait", false, func(context.Context, *backchannel.Call) (any, error) { return nil, nil }))
		if codeOf(err) != frames.CodeBadFrame || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("declaring a reserved name: %v", err)
		}
		if err := h.Declare(ctx, tool("fine", false, func(context.Context, *backchannel.Call) (any, error) { return 1, nil })); err != nil {
			t.Errorf("Declare: %v", err)
		}
		// A text session has no voice agent to speak an inject.
		if err := h.Inject(ctx, "hello", true); codeOf(err) != frames.CodeInjectRejected {
			t.Errorf("Inject: %v, want inject_rejected", err)
		}

		// Tools in the hello are checked like a declaration: Connect returns the refusal.
		_, err = backchannel.Connect(ctx, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, Logger: testLogger(),
			Tools: []backchannel.Tool{tool("bad name!", false, func(context.Context, *backchannel.Call) (any, error) { return nil, nil })}})
		if codeOf(err) != frames.CodeBadFrame {
			t.Errorf("an invalid tool name in the hello: %v", err)
		}
		if _, err := backchannel.Connect(ctx, backchannel.Options{URL: "ftp://x", APIKey: "k"}); err == nil || !strings.Contains(err.Error(), "ws://") {
			t.Errorf("a bad URL: %v", err)
		}

		// A wrong key is refused with unauthorized; a join token needs its session.
		_, err = backchannel.Connect(ctx, backchannel.Options{URL: b.URL, APIKey: "wrong", Logger: testLogger()})
		if codeOf(err) != frames.CodeUnauthorized {
			t.Errorf("wrong key: %v", err)
		}
		if _, err := backchannel.Connect(ctx, backchannel.Options{URL: b.URL, JoinToken: "x"}); err == nil || !strings.Contains(err.Error(), "SessionID") {
			t.Errorf("join token without a session: %v", err)
		}
		// A second host joins with the join token.
		h2 := connect(t, backchannel.Options{URL: b.URL, SessionID: h.SessionID(), JoinToken: h.JoinToken()})
		if h2.SessionID() != h.SessionID() {
			t.Errorf("joined %s, want %s", h2.SessionID(), h.SessionID())
		}
	})
}

// TestEnd: End ends the session; every host stops with *SessionEndedError and OnEvent sees
// session.ended then the stop; a state file is removed.
func TestEnd(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		state := filepath.Join(t.TempDir(), "host.json")
		events := make(chan backchannel.Event, 64)
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, StateFile: state,
			OnEvent: func(ev backchannel.Event) { events <- ev }})
		other := connect(t, backchannel.Options{URL: b.URL, SessionID: h.SessionID(), JoinToken: h.JoinToken()})
		if _, err := os.Stat(state); err != nil {
			t.Fatalf("state file after the welcome: %v", err)
		}
		if err := h.End(ctxT(t)); err != nil {
			t.Fatalf("End: %v", err)
		}
		closed(t, "Done", h.Done())
		closed(t, "other host's Done", other.Done())
		var se *backchannel.SessionEndedError
		if !errors.As(other.Err(), &se) || se.Reason != frames.EndReasonEnded {
			t.Errorf("other host's Err: %v", other.Err())
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state file after the end: %v", err)
		}
		var kinds []string
		for len(events) > 0 {
			ev := <-events
			k := string(ev.Kind)
			if ev.Frame != nil {
				k += ":" + ev.Frame.FrameType()
			}
			kinds = append(kinds, k)
		}
		if got := strings.Join(kinds, " "); got != "connected frame:session.ended stopped" {
			t.Errorf("events: %s", got)
		}
		if err := h.Declare(ctxT(t)); !errors.As(err, &se) {
			t.Errorf("a request after the end: %v", err)
		}
	})
}

// TestFrameLimit: a frame over the broker's frame limit (SPEC 2) never passes for applied. The
// broker answers it with limit_exceeded without ref (it did not read the frame's id), and the
// request fails with that code although the barrier after it is answered; a frame over the
// default limit of 1 MiB is refused before it is sent. The host goes on either way.
func TestFrameLimit(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{Limits: broker.Limits{MaxFrameBytes: 4 << 10}}})
			h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA})
			ctx := ctxT(t)
			if err := h.Inject(ctx, strings.Repeat("x", 8<<10), false); codeOf(err) != frames.CodeLimitExceeded {
				t.Errorf("a frame over the broker's limit: %v, want limit_exceeded", err)
			}
			err := h.Inject(ctx, strings.Repeat("x", 1<<20), false)
			if err == nil || codeOf(err) != "" || !strings.Contains(err.Error(), "frame limit") {
				t.Errorf("a frame over 1 MiB: %v, want refused before it is sent", err)
			}
			if err := h.Inject(ctx, "small", false); codeOf(err) != frames.CodeInjectRejected {
				t.Errorf("a request after the refusals: %v, want the text session's inject_rejected", err)
			}
		})
	}
}

// TestCallProgress: Call.Progress before the answer re-arms the call's ordinary timeout (SPEC
// 7): a handler that reports progress every 400 ms answers after 1.2 s although the tool's
// timeout is 1 s, and the agent gets its result. Once the call is over, Progress fails with
// call_finished.
func TestCallProgress(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *brokertest.Broker) {
		finished := make(chan *backchannel.Call, 1)
		slow := tool("slow", false, func(ctx context.Context, call *backchannel.Call) (any, error) {
			for i := range 3 {
				time.Sleep(400 * time.Millisecond)
				if err := call.Progress(ctx, fmt.Sprintf("step %d of 3", i+1)); err != nil {
					return nil, err
				}
			}
			finished <- call
			return "done", nil
		})
		slow.Decl.Timeout = frames.Duration(time.Second)
		h := connect(t, backchannel.Options{URL: b.URL, APIKey: brokertest.KeyA, Tools: []backchannel.Tool{slow}})
		a := newAgent(t, b, h.SessionID(), h.JoinToken())
		a.call("c1", "slow", map[string]any{})
		if r := a.final("c1"); r.Kind != frames.ResultKindResult || r.Content != "done" {
			t.Fatalf("slow result: %s %q, want the handler's answer (progress re-arms the timeout)", r.Kind, r.Content)
		}
		call := <-finished
		if err := call.Progress(ctxT(t), "too late"); codeOf(err) != frames.CodeCallFinished {
			t.Errorf("progress after the result: %v, want call_finished", err)
		}
	})
}
