package textagent

import (
	"strings"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// openInteraction is an interaction of one of the conversation's calls, open for an answer.
type openInteraction struct {
	k       *call
	options []string
}

// interactions of the agent's calls, by interaction id.
func (a *Agent) interactionsOf(c *conversation) map[string]*openInteraction {
	out := map[string]*openInteraction{}
	for id, o := range a.open {
		if o.k.conv == c {
			out[id] = o
		}
	}
	return out
}

// answers matches an agent.interaction_answer against the conversation's open interaction of
// that id (SPEC 9): a given option that is one of the options, or else the text by the rule of
// section 9.
func (a *Agent) answers(c *conversation, f *frames.AgentInteractionAnswer) {
	o := a.interactionsOf(c)[f.InteractionID]
	if o == nil {
		a.sendError(f.ID, frames.Errorf(frames.CodeBadFrame, "conversation %s has no open interaction %q", c.id, f.InteractionID))
		return
	}
	option, ok := "", false
	if f.Option != "" {
		for _, opt := range o.options {
			if strings.EqualFold(strings.TrimSpace(f.Option), opt) {
				option, ok = opt, true
			}
		}
	}
	if !ok {
		option, ok = jobs.MatchAnswer(f.Text, o.options)
	}
	if !ok {
		a.sendError(f.ID, frames.Errorf(frames.CodeBadFrame, "the answer matches none of the options of interaction %q: %s", f.InteractionID, strings.Join(o.options, ", ")))
		return
	}
	res, err := a.env.AnswerInteraction(o.k.brokerID, f.InteractionID, option, f.Text)
	if err != nil || res != frames.UpdateApplied {
		a.sendError(f.ID, frames.Errorf(frames.CodeBadFrame, "interaction %q is no longer open", f.InteractionID))
	}
	delete(a.open, f.InteractionID)
}

// InteractionClosed forgets an interaction that closed (answered, updated by its host, or
// with its call).
func (a *Agent) InteractionClosed(interactionID string) { delete(a.open, interactionID) }
