package narration

// Ending is how an attempt's response ended.
type Ending int

// The endings of an attempt.
const (
	Played      Ending = iota // the response ended by itself
	Interrupted               // the caller barged in
	ModelFailed               // the model failed the response
	NoFloor                   // no free floor within the maximum wait
)

// Reason is why a completion could not be delivered (tool_job_delivery_failed).
type Reason string

// The reasons of a failed attempt.
const (
	NoAudibleSpeech Reason = "no_audible_speech"
	ModelError      Reason = "model_error"
	SessionEnded    Reason = "session_ended"
	FloorTimeout    Reason = "floor_timeout"
)

// Outcome is what becomes of an item after an attempt.
type Outcome struct {
	State   string // the last tool_job_narration state of the attempt
	Counted bool   // it counts as delivered
	Retry   bool   // queue it again with the next attempt
	Failed  bool   // completions: tool_job_delivery_failed now
	Reason  Reason // why the attempt failed
}

// MaxCompletionAttempts is how often a completion is tried (SPEC 8: retried once).
const MaxCompletionAttempts = 2

// MaxAskAttempts is how often an interaction ask is tried in all (SPEC 9).
const MaxAskAttempts = 3

// Decide applies the failure contract of SPEC 8 (and the re-ask rule of SPEC 9) to one attempt
// of item it that ended with e; audible says whether its speech was delivered.
func Decide(it *Item, e Ending, audible bool) Outcome {
	var o Outcome
	switch e {
	case Played:
		if audible {
			return Outcome{State: "delivered", Counted: true}
		}
		o = Outcome{State: "failed", Reason: NoAudibleSpeech}
	case ModelFailed:
		o = Outcome{State: "failed", Reason: ModelError}
	case Interrupted:
		o = Outcome{State: "interrupted", Reason: NoAudibleSpeech}
		if audible && it.Kind == Completion {
			o.Counted = true // an interrupted completion with 200 ms of speech counts as delivered
			return o
		}
		if it.Kind == Milestone {
			return o // an interrupted milestone is not repeated
		}
	case NoFloor:
		o = Outcome{State: "skipped", Reason: FloorTimeout}
	}
	switch it.Kind {
	case Completion:
		if it.Attempt < MaxCompletionAttempts {
			o.Retry = true
		} else {
			o.Failed = true
		}
	case InteractionAsk:
		o.Retry = it.Attempt < MaxAskAttempts
	}
	return o
}
