package permissions

import (
	"context"

	"github.com/backchannel-io/backchannel/jobs"
)

// Rules is the rule-based verifier, the default Verifier (SPEC 12). It is deterministic, needs
// no network and no configuration, and approves only a clear, unconditional authorization of the
// exact pending action: a reply that passes every veto (see Veto) and consists of approval
// phrases ("yes", "go ahead", "yes please", "that's fine, do it") and neutral words only —
// fillers, polite and function words, and words or numbers of the action itself ("yes, book two
// tickets" when the arguments say 2). It declines a clean refusal ("no", "don't", "cancel that")
// and holds everything else.
//
// The zero value is ready to use and safe for concurrent use.
type Rules struct{}

// NewRules returns the rule-based verifier.
func NewRules() *Rules { return &Rules{} }

// Verify judges a reply to the pending action a. It never returns an error; ctx is not used.
func (r *Rules) Verify(_ context.Context, a Action, reply string) (Judgement, error) {
	return r.judge(a, reply), nil
}

func (r *Rules) judge(a Action, reply string) Judgement {
	if len(reply) > maxReplyBytes {
		return Judgement{Verdict: jobs.Hold, Reason: ReasonUnclear}
	}
	an := analyze(a, reply)
	if j, ok := an.veto(); ok {
		return j
	}
	if an.approves() {
		return Judgement{Verdict: jobs.Approve, Reason: ReasonClearApproval}
	}
	return Judgement{Verdict: jobs.Hold, Reason: ReasonUnclear}
}
