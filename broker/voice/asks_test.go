package voice

import (
	"fmt"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/jobs"
)

// Asks and answers by voice (SPEC 9) on the fake clock.

// openAsk defers a call and opens an interaction on it; the hand-off is played first.
func (r *rig) openAsk() *jobs.Job {
	r.t.Helper()
	j := r.handOffSpoken()
	r.v.JobChanged(jobs.Change{Event: jobs.EventPartial, From: jobs.Deferred, Job: j,
		Entries:     []jobs.Entry{{Kind: jobs.KindPartial, Detail: map[string]any{"segment": "seats", "reply": false}}},
		Interaction: &jobs.Interaction{ID: "ia1", Prompt: "Window or aisle?", Options: []string{"window", "aisle"}}})
	r.advance(coalesce)
	if got := r.m.requests[len(r.m.requests)-1]; got.Kind != model.InteractionAsk || got.Prompt != "Window or aisle?" {
		r.t.Fatalf("asked %+v, want the interaction", got)
	}
	return j
}

func TestAskReaskedAfter30sThreeTimesAtMost(t *testing.T) {
	r := attached(t)
	r.openAsk()
	r.speak(r.m.last(), loud(600), "Window or aisle?")
	r.wantNarrations("interaction queued 1", "interaction speaking 1", "interaction delivered 1")
	asked := len(r.m.requests)
	r.advance(DefaultReaskAfter - time.Millisecond)
	if len(r.env.narrations()) != 3 {
		t.Fatalf("the ask was queued again before 30 s: %q", r.env.narrations())
	}
	r.advance(time.Millisecond)
	if len(r.env.narrations()) != 4 {
		t.Fatal("the ask was not queued again at 30 s")
	}
	r.advance(coalesce)
	if len(r.m.requests) != asked+1 {
		t.Fatal("the ask was not asked again at 30 s")
	}
	r.speak(r.m.last(), loud(600), "")
	r.advance(DefaultReaskAfter + coalesce)
	r.speak(r.m.last(), loud(600), "")
	r.advance(10 * DefaultReaskAfter)
	if n := len(r.m.requests) - asked + 1; n != 3 {
		t.Fatalf("the ask was spoken %d times, want 3 at most (SPEC 9)", n)
	}
	r.wantNarrations("interaction queued 1", "interaction speaking 1", "interaction delivered 1",
		"interaction queued 2", "interaction speaking 2", "interaction delivered 2",
		"interaction queued 3", "interaction speaking 3", "interaction delivered 3")
}

func TestAnswerByVoice(t *testing.T) {
	r := attached(t)
	j := r.openAsk()
	r.speak(r.m.last(), loud(600), "Window or aisle?")
	if fmt.Sprint(r.m.autoRespond) != "[false]" {
		t.Fatalf("auto-respond while the ask waits: %v, want [false]", r.m.autoRespond)
	}
	r.v.CallerText("hmm, not sure", r.env.Now())
	if fmt.Sprint(r.m.turns) != "[hmm, not sure [window aisle]]" || len(r.env.answers) != 0 {
		t.Fatalf("an unmatched reply: turns %q answers %v; want a clarifying turn and no answer", r.m.turns, r.env.answers)
	}
	r.v.CallerText("the aisle please", r.env.Now())
	if fmt.Sprint(r.env.answers) != "["+j.CallID+"/ia1=aisle]" {
		t.Fatalf("answers = %v, want aisle for ia1", r.env.answers)
	}
	if len(r.m.turns) != 1 || fmt.Sprint(r.m.autoRespond) != "[false true]" {
		t.Fatalf("after the answer: turns %q auto-respond %v; the answer is no turn, auto-respond back on", r.m.turns, r.m.autoRespond)
	}
	r.quietFor(time.Minute, "an answered ask is not asked again")
}

func TestAskStoppedWhenTheJobEnds(t *testing.T) {
	r := attached(t)
	j := r.openAsk()
	r.v.ResponseStarted(r.m.last())
	r.v.Audio(r.m.last(), loud(2000))
	speaking := r.m.last()
	r.end(j, jobs.Cancelled, "")
	r.wantNarrations("interaction queued 1", "interaction speaking 1", "interaction stopped 1")
	if len(r.m.cancels) != 1 || r.m.cancels[0] != speaking {
		t.Fatalf("cancels = %v, want the ask being spoken cut", r.m.cancels)
	}
}
