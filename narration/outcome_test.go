package narration_test

import (
	"fmt"
	"testing"

	"github.com/backchannel-io/backchannel/narration"
)

var endingNames = map[narration.Ending]string{
	narration.Played:      "played",
	narration.Interrupted: "interrupted",
	narration.ModelFailed: "model failed",
	narration.NoFloor:     "no floor",
}

// TestDecide applies the failure contract of SPEC 8 (and SPEC 9's re-ask rule) to every kind of
// attempt: delivered, failed no_audible_speech, model_error, floor timeout skipped, barge-in
// (an interrupted completion with 200 ms of speech counts as delivered, with less it is retried;
// an interrupted milestone is not repeated), completions retried once then delivery failed,
// asks re-queued up to 3 attempts in all.
func TestDecide(t *testing.T) {
	type want = narration.Outcome
	var (
		delivered = want{State: "delivered", Counted: true}
		none      narration.Reason
	)
	tests := []struct {
		kind    narration.Kind
		attempt int
		ending  narration.Ending
		audible bool
		want    narration.Outcome
	}{
		// Played to the end with audible speech: delivered, whatever the kind or attempt.
		{narration.Milestone, 1, narration.Played, true, delivered},
		{narration.Completion, 1, narration.Played, true, delivered},
		{narration.Completion, 2, narration.Played, true, delivered},
		{narration.InteractionAsk, 1, narration.Played, true, delivered},
		{narration.InteractionAsk, 3, narration.Played, true, delivered},
		{narration.HandOff, 1, narration.Played, true, delivered},
		{narration.Inject, 1, narration.Played, true, delivered},
		{narration.PermissionAsk, 1, narration.Played, true, delivered},

		// Played without audible speech: failed, never delivered.
		{narration.Milestone, 1, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech}},
		{narration.HandOff, 1, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech}},
		{narration.Inject, 1, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech}},
		{narration.PermissionAsk, 1, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech}},
		{narration.Completion, 1, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech, Retry: true}},
		{narration.Completion, 2, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech, Failed: true}},
		{narration.InteractionAsk, 1, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech, Retry: true}},
		{narration.InteractionAsk, 2, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech, Retry: true}},
		{narration.InteractionAsk, 3, narration.Played, false, want{State: "failed", Reason: narration.NoAudibleSpeech}},

		// The model failed the response: failed model_error, whatever was heard.
		{narration.Milestone, 1, narration.ModelFailed, false, want{State: "failed", Reason: narration.ModelError}},
		{narration.Milestone, 1, narration.ModelFailed, true, want{State: "failed", Reason: narration.ModelError}},
		{narration.Completion, 1, narration.ModelFailed, false, want{State: "failed", Reason: narration.ModelError, Retry: true}},
		{narration.Completion, 2, narration.ModelFailed, false, want{State: "failed", Reason: narration.ModelError, Failed: true}},
		{narration.Completion, 2, narration.ModelFailed, true, want{State: "failed", Reason: narration.ModelError, Failed: true}},
		{narration.InteractionAsk, 2, narration.ModelFailed, false, want{State: "failed", Reason: narration.ModelError, Retry: true}},
		{narration.InteractionAsk, 3, narration.ModelFailed, false, want{State: "failed", Reason: narration.ModelError}},

		// No free floor within narration_max_wait_ms: skipped; a completion counts it as a failed
		// attempt, an ask is re-queued by SPEC 9.
		{narration.Milestone, 1, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout}},
		{narration.HandOff, 1, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout}},
		{narration.Inject, 1, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout}},
		{narration.Completion, 1, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout, Retry: true}},
		{narration.Completion, 2, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout, Failed: true}},
		{narration.InteractionAsk, 1, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout, Retry: true}},
		{narration.InteractionAsk, 3, narration.NoFloor, false, want{State: "skipped", Reason: narration.FloorTimeout}},

		// Barge-in.
		{narration.Completion, 1, narration.Interrupted, true, want{State: "interrupted", Reason: narration.NoAudibleSpeech, Counted: true}},
		{narration.Completion, 2, narration.Interrupted, true, want{State: "interrupted", Reason: narration.NoAudibleSpeech, Counted: true}},
		{narration.Completion, 1, narration.Interrupted, false, want{State: "interrupted", Reason: narration.NoAudibleSpeech, Retry: true}},
		{narration.Completion, 2, narration.Interrupted, false, want{State: "interrupted", Reason: narration.NoAudibleSpeech, Failed: true}},
		{narration.Milestone, 1, narration.Interrupted, true, want{State: "interrupted", Reason: narration.NoAudibleSpeech}},
		{narration.Milestone, 1, narration.Interrupted, false, want{State: "interrupted", Reason: narration.NoAudibleSpeech}},
		{narration.InteractionAsk, 1, narration.Interrupted, false, want{State: "interrupted", Reason: narration.NoAudibleSpeech, Retry: true}},
		{narration.InteractionAsk, 1, narration.Interrupted, true, want{State: "interrupted", Reason: narration.NoAudibleSpeech, Retry: true}},
		{narration.InteractionAsk, 3, narration.Interrupted, true, want{State: "interrupted", Reason: narration.NoAudibleSpeech}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s attempt %d %s audible %v", kindNames[tc.kind], tc.attempt, endingNames[tc.ending], tc.audible), func(t *testing.T) {
			it := &narration.Item{Kind: tc.kind, CallID: "call_x", Attempt: tc.attempt, Queued: at(0)}
			got := narration.Decide(it, tc.ending, tc.audible)
			w := tc.want
			// The reason matters only where something failed; a delivered attempt has none.
			if w.Counted && w.State == "delivered" && got.Reason != none {
				t.Errorf("delivered with reason %q", got.Reason)
			}
			if got.State != w.State || got.Counted != w.Counted || got.Retry != w.Retry || got.Failed != w.Failed {
				t.Fatalf("Decide = %+v, want %+v", got, w)
			}
			if !w.Counted && got.Reason != w.Reason {
				t.Fatalf("reason %q, want %q", got.Reason, w.Reason)
			}
			if got.Retry && got.Failed {
				t.Fatalf("both retried and given up: %+v", got)
			}
			if it.Attempt != tc.attempt {
				t.Fatalf("Decide changed the item's attempt to %d", it.Attempt)
			}
		})
	}
}

// TestCompletionContract plays SPEC 8's contract for one completion over its attempts: at most
// two attempts, and exactly one terminal outcome (delivered, or delivery failed with the reason
// of the last failure).
func TestCompletionContract(t *testing.T) {
	type attempt struct {
		ending  narration.Ending
		audible bool
	}
	tests := []struct {
		name     string
		attempts []attempt
		states   string // the lifecycle state of each attempt
		failed   narration.Reason
	}{
		{"delivered at once", []attempt{{narration.Played, true}}, "delivered", ""},
		{"silent once, then delivered", []attempt{{narration.Played, false}, {narration.Played, true}}, "failed delivered", ""},
		{"silent twice", []attempt{{narration.Played, false}, {narration.Played, false}}, "failed failed", narration.NoAudibleSpeech},
		{"silent, then a model error", []attempt{{narration.Played, false}, {narration.ModelFailed, false}}, "failed failed", narration.ModelError},
		{"model error, then silent", []attempt{{narration.ModelFailed, false}, {narration.Played, false}}, "failed failed", narration.NoAudibleSpeech},
		{"no floor twice", []attempt{{narration.NoFloor, false}, {narration.NoFloor, false}}, "skipped skipped", narration.FloorTimeout},
		{"barged in early, then delivered", []attempt{{narration.Interrupted, false}, {narration.Played, true}}, "interrupted delivered", ""},
		{"barged in late: counts as delivered", []attempt{{narration.Interrupted, true}}, "interrupted", ""},
		{"barged in early twice", []attempt{{narration.Interrupted, false}, {narration.Interrupted, false}}, "interrupted interrupted", narration.NoAudibleSpeech},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it := &narration.Item{Kind: narration.Completion, CallID: "call_x", Attempt: 1}
			var states string
			var failed narration.Reason
			for i, a := range tc.attempts {
				o := narration.Decide(it, a.ending, a.audible)
				if i > 0 {
					states += " "
				}
				states += o.State
				last := i == len(tc.attempts)-1
				if o.Retry == last {
					t.Fatalf("attempt %d: retry %v, but it is %s attempt", it.Attempt, o.Retry, map[bool]string{true: "the last", false: "not the last"}[last])
				}
				if o.Failed {
					failed = o.Reason
				}
				if o.Retry {
					it.Attempt++
				}
			}
			if it.Attempt > narration.MaxCompletionAttempts || narration.MaxCompletionAttempts != 2 {
				t.Fatalf("%d attempts (max %d), SPEC 8 retries once", it.Attempt, narration.MaxCompletionAttempts)
			}
			if states != tc.states || failed != tc.failed {
				t.Fatalf("states %q delivery failed %q, want %q %q", states, failed, tc.states, tc.failed)
			}
		})
	}
}

// TestAskAttempts: an interaction ask that is never delivered is tried 3 times in all (SPEC 9).
func TestAskAttempts(t *testing.T) {
	if narration.MaxAskAttempts != 3 {
		t.Fatalf("MaxAskAttempts %d, want 3", narration.MaxAskAttempts)
	}
	for _, e := range []narration.Ending{narration.Played, narration.Interrupted, narration.ModelFailed, narration.NoFloor} {
		it := &narration.Item{Kind: narration.InteractionAsk, CallID: "call_x", Key: "ia_1", Attempt: 1}
		tries := 1
		for narration.Decide(it, e, false).Retry {
			it.Attempt++
			tries++
			if tries > 10 {
				break
			}
		}
		if tries != 3 {
			t.Errorf("%s: %d attempts, want 3", endingNames[e], tries)
		}
		if o := narration.Decide(it, e, false); o.Failed {
			t.Errorf("%s: an ask reported delivery failed (only completions do): %+v", endingNames[e], o)
		}
	}
}
