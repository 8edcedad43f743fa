package voice

import (
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/jobs"
)

// The caller's side: the broker's VAD on caller audio, and attach/detach (SPEC 8).

func TestCallerAudioDrivesTheFloor(t *testing.T) {
	r := attached(t)
	r.v.ResponseStarted("own")
	r.v.Audio("own", loud(2000))
	r.v.CallerAudio(loud(40), r.env.Now()) // 40 ms: not yet speech
	if len(r.m.cancels) != 0 {
		t.Fatal("40 ms of caller sound barged in (speech starts after 60 ms)")
	}
	r.v.CallerAudio(loud(20), r.env.Now())
	if len(r.m.cancels) != 1 || !r.v.floor.CallerSpeaking {
		t.Fatal("60 ms of caller speech did not barge in")
	}
	r.v.ResponseDone("own", true, nil)
	r.v.CallerAudio(quiet(280), r.env.Now())
	if !r.v.floor.CallerSpeaking {
		t.Fatal("280 ms of silence ended the caller's speech (it ends after 300 ms)")
	}
	r.v.CallerAudio(quiet(20), r.env.Now())
	if r.v.floor.CallerSpeaking {
		t.Fatal("300 ms of silence did not end the caller's speech")
	}
	if r.m.audio != (40+20+280+20)*8 {
		t.Fatalf("the model got %d bytes of caller audio, want all %d", r.m.audio, (40+20+280+20)*8)
	}
}

func TestNothingIsSpokenWithoutACaller(t *testing.T) {
	r := newRig(t)
	_, j := r.deferCall("m1", "book", "h1") // its hand-off waits for a caller
	r.end(j, jobs.Completed, `{}`)
	r.advance(10 * time.Second)
	if len(r.m.requests) != 0 {
		t.Fatalf("the model was asked %+v with no caller attached", r.m.requests)
	}
	r.v.CallerAttached()
	r.advance(coalesce)
	if len(r.m.requests) != 1 || r.m.requests[0].Kind != model.Completion {
		t.Fatalf("after the caller attached: %+v, want the completion alone (the job's end made its unspoken hand-off moot)", r.m.requests)
	}
	r.speak(r.m.last(), loud(300), "")
	if len(r.m.requests) != 1 {
		t.Fatalf("after the completion the model was asked for %+v: the hand-off of a job that ended is never spoken", r.m.requests[1:])
	}
	r.quietFor(time.Minute, "the hand-off of a job that ended is never spoken")
}
