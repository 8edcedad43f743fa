package permissions

import (
	"context"
	"encoding/json"

	"github.com/backchannel-io/backchannel/jobs"
)

// Action is the exact pending action the caller is asked to approve.
type Action struct {
	// Tool is the name of the tool the agent called.
	Tool string `json:"action"`
	// Arguments are the call's arguments, a JSON object (or empty).
	Arguments json.RawMessage `json:"arguments"`
	// Ask is how the agent phrased the ask: the final transcript of its response.
	Ask string `json:"ask"`
}

// Judgement is a verifier's verdict on one reply, with a short machine-friendly reason (one of
// the Reason constants for the rule-based verifier).
type Judgement struct {
	Verdict jobs.Verdict `json:"verdict"`
	Reason  string       `json:"reason"`
}

// Verifier judges a caller's reply against the exact pending action. Implementations must be
// safe for concurrent use. A Verifier that returns an error still returns a usable Judgement,
// which is never an approval.
type Verifier interface {
	Verify(ctx context.Context, a Action, reply string) (Judgement, error)
}

// The reasons the rule-based verifier gives. Vetoes hold (never approve); ReasonRefusal declines;
// ReasonClearApproval approves.
const (
	// ReasonClearApproval: a clear, unconditional authorization of the pending action.
	ReasonClearApproval = "clear_approval"
	// ReasonRefusal: a clear refusal ("no", "don't", "cancel that").
	ReasonRefusal = "refusal"
	// ReasonEmpty: silence, punctuation, fillers or noise annotations only.
	ReasonEmpty = "empty"
	// ReasonIncomplete: the reply ends on a word that needs more ("yes and", "yes, but").
	ReasonIncomplete = "incomplete"
	// ReasonNoise: words mixed with a noise annotation such as "[inaudible]": part of the reply
	// was not heard.
	ReasonNoise = "noise"
	// ReasonInstruction: text addressed to the system, prompt injection or role play.
	ReasonInstruction = "instruction"
	// ReasonReportedSpeech: quotes, or what someone else said or wants.
	ReasonReportedSpeech = "reported_speech"
	// ReasonQuestion: the reply asks something.
	ReasonQuestion = "question"
	// ReasonHypothetical: "would", "what if", "suppose", "in theory".
	ReasonHypothetical = "hypothetical"
	// ReasonCondition: "if", "only", "as long as", "unless", "but", ...
	ReasonCondition = "condition"
	// ReasonSarcasm: a sarcasm marker ("yeah right", "whatever", "oh great").
	ReasonSarcasm = "sarcasm"
	// ReasonAmbiguous: a hedge ("maybe", "I guess", "I think so", "hmm", "wait").
	ReasonAmbiguous = "ambiguous"
	// ReasonChangedArguments: a number, value, name or change word that is not in the action.
	ReasonChangedArguments = "changed_arguments"
	// ReasonNegation: a negation or refusal mixed with anything else ("yes, don't", "no wait
	// yes", "not yet").
	ReasonNegation = "negation"
	// ReasonUnclear: no veto, but not recognisably an approval or a refusal either (for example a
	// word the rules do not know).
	ReasonUnclear = "unclear"
)
