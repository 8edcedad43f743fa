package voice

import (
	"errors"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// The narration queue and its lifecycle (SPEC 8) on the fake clock.

// handOffSpoken defers a call and plays its hand-off sentence; it returns the job.
func (r *rig) handOffSpoken() *jobs.Job {
	r.t.Helper()
	_, j := r.deferCall("m1", "book", "h1")
	r.advance(coalesce)
	if len(r.m.requests) != 1 || r.m.requests[0].Kind != model.HandOff {
		r.t.Fatalf("after a defer the model was asked for %+v, want one hand-off", r.m.requests)
	}
	r.speak(r.m.last(), loud(600), "I'll book that in the background.")
	return j
}

func TestCompletionDelivered(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	if r.env.audio != 30 {
		t.Fatalf("the hand-off's 600 ms went out as %d frames, want 30", r.env.audio)
	}
	r.end(j, jobs.Completed, `{"ok":true}`)
	r.wantNarrations("completion queued 1")
	r.advance(coalesce)
	if got := r.m.requests[len(r.m.requests)-1]; got.Kind != model.Completion || got.State != "completed" || got.Label != "book" {
		t.Fatalf("completion request = %+v", got)
	}
	r.wantNarrations("completion queued 1", "completion speaking 1")
	r.speak(r.m.last(), loud(300), "Booked.")
	r.wantNarrations("completion queued 1", "completion speaking 1", "completion delivered 1")
	if len(r.env.deliveryFailed()) != 0 {
		t.Fatal("a delivered completion reported a delivery failure")
	}
}

func TestCompletionRetriedOnceThenDeliveryFailed(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	r.end(j, jobs.Completed, `{}`)
	r.advance(coalesce)
	r.speak(r.m.last(), quiet(600), "") // silence: nothing audible reached the caller
	r.speak(r.m.last(), loud(100), "")  // 100 ms is under the 200 ms that deliver
	r.wantNarrations("completion queued 1", "completion speaking 1", "completion failed 1",
		"completion queued 2", "completion speaking 2", "completion failed 2")
	df := r.env.deliveryFailed()
	if len(df) != 1 || df[0].Attempts != 2 || df[0].Reason != frames.DeliveryFailureReason("no_audible_speech") || df[0].Handle != "h1" {
		t.Fatalf("delivery failed frames = %+v, want one: attempts 2, no_audible_speech, handle h1", df)
	}
	if n := len(r.m.requests); n != 3 {
		t.Fatalf("the model was asked %d times, want 3 (hand-off, two attempts)", n)
	}
}

func TestModelRefusesTheCompletion(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	r.m.respondErr = errors.New("model gone")
	r.end(j, jobs.Completed, `{}`)
	r.advance(coalesce)
	r.advance(coalesce)
	r.wantNarrations("completion queued 1", "completion failed 1", "completion queued 2", "completion failed 2")
	if df := r.env.deliveryFailed(); len(df) != 1 || df[0].Reason != "model_error" || df[0].Attempts != 2 {
		t.Fatalf("delivery failed = %+v, want model_error after 2 attempts", df)
	}
}

func TestFloorGraceAfterCallerSpeech(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	r.v.SpeechStarted(r.env.Now())
	r.end(j, jobs.Completed, `{}`)
	r.advance(time.Second)
	if len(r.m.requests) != 1 {
		t.Fatal("a completion was spoken while the caller was speaking")
	}
	r.v.SpeechStopped()
	r.advance(399 * time.Millisecond)
	if len(r.m.requests) != 1 {
		t.Fatal("a completion was spoken within the 400 ms grace after the caller stopped")
	}
	r.advance(time.Millisecond)
	if len(r.m.requests) != 2 {
		t.Fatal("the completion was not spoken when the grace ended")
	}
	if d := r.env.delays[len(r.env.delays)-1]; d != 0 {
		t.Fatalf("narration start delay = %v, want 0 (requested the moment the floor freed)", d)
	}
}

func TestFloorTimeoutSkipsThenFails(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	r.v.SpeechStarted(r.env.Now()) // the caller talks on and on
	r.end(j, jobs.Completed, `{}`)
	r.advance(DefaultMaxWait - time.Millisecond)
	r.wantNarrations("completion queued 1")
	r.advance(2 * time.Millisecond)
	r.wantNarrations("completion queued 1", "completion skipped 1", "completion queued 2")
	r.advance(DefaultMaxWait + time.Millisecond)
	r.wantNarrations("completion queued 1", "completion skipped 1", "completion queued 2", "completion skipped 2")
	if df := r.env.deliveryFailed(); len(df) != 1 || df[0].Reason != "floor_timeout" || df[0].Attempts != 2 {
		t.Fatalf("delivery failed = %+v, want floor_timeout after 2 attempts", df)
	}
}

func TestBargeIn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heard     time.Duration
		delivered bool
	}{
		{"before 200 ms of speech: retried", 100 * time.Millisecond, false},
		{"after 200 ms of speech: delivered", 300 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := attached(t)
			j := r.handOffSpoken()
			r.end(j, jobs.Completed, `{}`)
			r.advance(coalesce)
			id := r.m.last()
			r.v.ResponseStarted(id)
			r.v.Audio(id, loud(2000))
			r.advance(tc.heard - 20*time.Millisecond) // the first frame went at once
			r.v.SpeechStarted(r.env.Now())
			if len(r.m.cancels) != 1 || r.m.cancels[0] != id {
				t.Fatalf("barge-in cancelled %v, want %s", r.m.cancels, id)
			}
			sentBefore := r.env.audio
			r.advance(time.Second)
			if r.env.audio != sentBefore {
				t.Fatal("audio kept playing after the caller barged in")
			}
			if tc.delivered {
				r.wantNarrations("completion queued 1", "completion speaking 1", "completion interrupted 1")
				if len(r.env.deliveryFailed()) != 0 {
					t.Fatal("a completion heard for 300 ms failed")
				}
				return
			}
			r.wantNarrations("completion queued 1", "completion speaking 1", "completion interrupted 1", "completion queued 2")
			r.v.SpeechStopped()
			r.advance(400 * time.Millisecond)
			r.wantNarrations("completion queued 1", "completion speaking 1", "completion interrupted 1", "completion queued 2", "completion speaking 2")
		})
	}
}

func TestHighestPriorityFirstAfterCoalescing(t *testing.T) {
	r := attached(t)
	a := r.handOffSpoken()
	r.deferCall("m2", "search", "h2") // its hand-off is queued…
	r.end(a, jobs.Completed, `{}`)    // …and, in the same moment, a's completion
	r.advance(coalesce)
	if got := r.lastKind(); got != model.Completion {
		t.Fatalf("spoken first: %s, want the completion (SPEC 8 priority)", got)
	}
	r.speak(r.m.last(), loud(300), "")
	if got := r.lastKind(); got != model.HandOff {
		t.Fatalf("spoken next: %s, want the hand-off", got)
	}
}

func TestPlayoutIsPacedAndStops(t *testing.T) {
	r := attached(t)
	r.v.ResponseStarted("own")
	r.v.Audio("own", loud(1000)) // a burst of 1 s arrives at once
	r.v.ResponseDone("own", false, nil)
	if r.env.audio != 1 {
		t.Fatalf("%d frames went at once, want 1 (the rest paced at 20 ms)", r.env.audio)
	}
	r.advance(500 * time.Millisecond)
	if r.env.audio != 26 {
		t.Fatalf("after 500 ms %d frames were played, want 26", r.env.audio)
	}
	if !r.v.floor.InFlight {
		t.Fatal("the floor was free while the response still played")
	}
	r.advance(500 * time.Millisecond)
	if r.env.audio != 50 || r.v.floor.InFlight {
		t.Fatalf("after 1 s: %d frames, in flight %v; want 50, free", r.env.audio, r.v.floor.InFlight)
	}
	for _, tm := range r.env.clock.timers {
		if !tm.stopped && tm.every > 0 {
			t.Fatal("the playout clock still runs with nothing to play")
		}
	}
}

func TestUnheardTranscriptNotShown(t *testing.T) {
	r := attached(t)
	r.v.ResponseStarted("own")
	r.v.SpeechStarted(r.env.Now()) // barged in before any audio
	r.v.Transcript("own", "words never heard", true)
	r.v.ResponseDone("own", true, nil)
	r.v.Transcript("own", "words never heard", true)
	for _, s := range r.env.frames {
		if tr, ok := s.f.(*frames.Transcript); ok && tr.Role == frames.RoleAgent {
			t.Fatalf("the caller saw %q of a response cut before it played (SPEC 17)", tr.Text)
		}
	}
}

func TestInject(t *testing.T) {
	r := attached(t)
	r.v.Inject("host", &frames.Inject{Request: frames.Request{ID: "i1"}, Text: "Your ride is here."})
	r.advance(coalesce)
	if len(r.m.requests) != 1 || r.m.requests[0].Kind != model.Inject {
		t.Fatalf("requests = %+v, want the inject", r.m.requests)
	}
	r.v.ResponseStarted(r.m.last())
	r.v.Inject("host", &frames.Inject{Request: frames.Request{ID: "i2"}, Text: "Again."})
	var e *frames.Error
	for _, s := range r.env.frames {
		if f, ok := s.f.(*frames.Error); ok && s.slot == "host" {
			e = f
		}
	}
	if e == nil || e.Code != frames.CodeInjectRejected || !e.Retryable || e.Ref != "i2" {
		t.Fatalf("an inject while a response is in flight got %+v, want inject_rejected retryable with ref i2", e)
	}
}

func TestSessionEnd(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	r.v.SpeechStarted(r.env.Now())
	r.end(j, jobs.Completed, `{}`)
	r.v.SpeechStopped()
	r.v.Inject("host", &frames.Inject{Request: frames.Request{ID: "i1"}, Text: "later"})
	r.v.SpeechStarted(r.env.Now())
	r.v.End()
	df := r.env.deliveryFailed()
	if len(df) != 1 || df[0].Reason != "session_ended" || df[0].Attempts != 0 {
		t.Fatalf("delivery failed = %+v, want session_ended with 0 attempts spoken", df)
	}
	var rejected bool
	for _, s := range r.env.frames {
		if e, ok := s.f.(*frames.Error); ok && e.Code == frames.CodeInjectRejected && e.Ref == "i1" && !e.Retryable {
			rejected = true
		}
	}
	if !rejected || !r.m.closed {
		t.Fatalf("inject rejected %v, model closed %v: want both", rejected, r.m.closed)
	}
	r.quietFor(time.Hour, "nothing is said after the session ended")
}

func TestParkAndAdopt(t *testing.T) {
	r := attached(t)
	j := r.handOffSpoken()
	r.end(j, jobs.Completed, `{"n":1}`)
	r.advance(coalesce)
	r.v.ResponseStarted(r.m.last()) // being spoken when the node shuts down
	parked := r.v.Park()
	r.wantNarrations("completion queued 1", "completion speaking 1", "completion failed 1")
	if len(parked) != 1 || parked[0].Attempt != 2 || parked[0].Handle != "h1" || parked[0].Slot != "host" || parked[0].Spoken != 1 {
		t.Fatalf("parked = %+v, want the completion as attempt 2", parked)
	}
	r.v.Stop()

	// Parked during its last attempt, a completion fails for good: nothing goes to the next node.
	last := attached(t)
	lj := last.handOffSpoken()
	last.end(lj, jobs.Completed, `{}`)
	last.advance(coalesce)
	last.speak(last.m.last(), quiet(300), "")
	last.v.ResponseStarted(last.m.last()) // attempt 2 is being spoken
	if p := last.v.Park(); len(p) != 0 {
		t.Fatalf("parked %+v after the last attempt, want nothing", p)
	}
	if df := last.env.deliveryFailed(); len(df) != 1 || df[0].Attempts != 2 || df[0].Reason != "model_error" {
		t.Fatalf("delivery failed = %+v, want model_error after 2 attempts", df)
	}

	next := attached(t) // the node that takes the session back
	next.v.Adopt(nil, parked)
	next.advance(coalesce)
	if len(next.m.requests) != 1 || next.m.requests[0].Kind != model.Completion {
		t.Fatalf("the next node asked %+v, want the parked completion", next.m.requests)
	}
	next.speak(next.m.last(), loud(300), "")
	next.wantNarrations("completion queued 2", "completion speaking 2", "completion delivered 2")
}
