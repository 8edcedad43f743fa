package voicetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestPermissionTimeout covers SPEC 5 and 12 through the broker (broker.Config.PermissionTimeout):
// a permission ask the caller never answers is declined with reason permission_timeout, the
// clock counted from the END of the spoken ask. The agent is told `declined by the caller` as an
// error, the timeline has the permission entry, the host never hears of the call, the ask is
// closed (the next caller turn goes to the model), and the decline comes no earlier than the
// ask's end + the timeout. The ask is made long (about 1.8 s of speech) so that a clock started
// at the ask's start, or at the call, would fire measurably too early.
func TestPermissionTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			rec := &resultRecorder{}
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: broker.Config{
				ResumeWindow:      20 * time.Second,
				PermissionTimeout: timeout,
				Models:            map[string]model.Factory{"scripted": rec.factory(scriptedModel)},
			}})
			vs := newVoiceSession(t, b, true)

			args := fmt.Sprintf(`{"amount":5,"memo":%q}`, words("m", 20))
			said := time.Now()
			ask := vs.askFor(args) // the ask was spoken and played out; the host got nothing
			last, ok := vs.caller.lastAudio()
			if !ok {
				t.Fatal("no agent audio for the ask")
			}
			// The ask cannot have ended before its last frame was sent: the broker plays one
			// 20 ms frame per tick, the first one no earlier than the caller's request.
			askEnd := said.Add(time.Duration(scriptedFrames(ask)-1) * 20 * time.Millisecond)
			earliest := askEnd.Add(timeout)

			// The caller says nothing. The agent is told the call was declined.
			r := rec.wait(t, "declined by the caller")
			if !r.isError {
				t.Errorf("SPEC 12: the decline went to the model as a success: %+v", r)
			}
			if r.at.Before(earliest.Add(-2 * time.Millisecond)) {
				t.Errorf("SPEC 12: declined %v after the ask's last audio arrived, %v before the earliest ask end + permission_timeout (%v)",
					r.at.Sub(last.At).Round(time.Millisecond), earliest.Sub(r.at).Round(time.Millisecond), timeout)
			}
			if late := last.At.Add(timeout + 5*time.Second); r.at.After(late) {
				t.Errorf("SPEC 12: declined only %v after the ask's last audio arrived (permission_timeout %v)",
					r.at.Sub(last.At).Round(time.Millisecond), timeout)
			}
			t.Logf("declined %v after the ask's last audio arrived (permission_timeout %v)", r.at.Sub(last.At).Round(time.Millisecond), timeout)

			e := vs.expectEntry("permission timeout", "permission", func(e entry) bool { return e.str("verdict") == "decline" })
			if e.str("reason") != "permission_timeout" {
				t.Errorf("SPEC 12: permission entry %s, want reason permission_timeout", e)
			}
			if e.AtMS < earliest.UnixMilli()-2 {
				t.Errorf("SPEC 12: permission entry at %d, %d ms before the earliest ask end + permission_timeout", e.AtMS, earliest.UnixMilli()-e.AtMS)
			}
			perms := 0
			for _, x := range vs.timeline() {
				if x.Kind == "permission" {
					perms++
				}
			}
			if perms != 1 {
				t.Errorf("SPEC 12: %d permission entries, want the one decision (silence is no reply)", perms)
			}

			// The host never hears of a declined call.
			time.Sleep(500 * time.Millisecond)
			vs.host.never(typ("tool_call"), "SPEC 12: the host never hears of a declined call")
			vs.host.never(typ("tool_cancel"), "SPEC 12: the host never hears of a declined call")

			// The ask is closed: the next turn goes to the model, not to the verifier.
			from := vs.say("say moving on")
			vs.heard(from, "moving on")
		})
	}
}

// toolResult is one function output the broker gave the model.
type toolResult struct {
	callID, output   string
	isError, respond bool
	at               time.Time
}

// resultRecorder wraps a model factory to record the function outputs the broker gives the
// model (what the agent is told), passing everything on to the real model.
type resultRecorder struct {
	mu      sync.Mutex
	results []toolResult
}

// recordingModel is a model whose ToolResult calls are recorded.
type recordingModel struct {
	model.Model
	rec *resultRecorder
}

func (m *recordingModel) ToolResult(callID, output string, isError, respond bool) {
	m.rec.mu.Lock()
	m.rec.results = append(m.rec.results, toolResult{callID: callID, output: output, isError: isError, respond: respond, at: time.Now()})
	m.rec.mu.Unlock()
	m.Model.ToolResult(callID, output, isError, respond)
}

func (r *resultRecorder) factory(inner model.Factory) model.Factory {
	return wrapModels(inner, func(m model.Model) model.Model { return &recordingModel{Model: m, rec: r} })
}

// wait waits up to waitTimeout for a function output equal to output and returns it.
func (r *resultRecorder) wait(t testing.TB, output string) toolResult {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		r.mu.Lock()
		all := append([]toolResult(nil), r.results...)
		r.mu.Unlock()
		for _, x := range all {
			if x.output == output {
				return x
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the model was never given the output %q; it got %+v", output, all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
