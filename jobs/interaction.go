package jobs

import (
	"context"
	"strings"
	"unicode"

	"github.com/backchannel-io/backchannel/frames"
)

// UpdateInteraction applies a host's tool_interaction_update (SPEC 9): the open interaction id
// closes with state (resolved, cancelled or superseded) and the job keeps running; its ordinary
// timeout, if pending, starts again from now. The answer is deterministic: applied the first
// time, already_closed for an interaction that was closed (or whose call ended), and
// unknown_interaction for an id the job never had. ErrUnknownCall when the session cannot see
// the job.
func (e *Engine) UpdateInteraction(ctx context.Context, a Addr, interactionID string, state frames.InteractionState) (frames.InteractionUpdateResult, error) {
	return e.closeInteraction(ctx, a, interactionID, string(state), nil)
}

// Answer is the caller's reply to an interaction (SPEC 9).
type Answer struct {
	Option string // the option it matched, if any
	Text   string
}

// AnswerInteraction closes an open interaction as answered with the caller's reply. It answers
// like UpdateInteraction: applied only for the open interaction of that id.
func (e *Engine) AnswerInteraction(ctx context.Context, a Addr, interactionID string, ans Answer) (frames.InteractionUpdateResult, error) {
	return e.closeInteraction(ctx, a, interactionID, InteractionAnswered, &ans)
}

func (e *Engine) closeInteraction(ctx context.Context, a Addr, id, how string, ans *Answer) (frames.InteractionUpdateResult, error) {
	j, err := e.resolve(ctx, a)
	if err != nil {
		return "", err
	}
	var result frames.InteractionUpdateResult
	err = e.run(ctx, j, func(j *Job, now int64) (*plan, error) {
		if j.Interaction == nil || j.Interaction.ID != id {
			result = frames.UpdateUnknownInteraction
			if _, ok := j.Closed[id]; ok {
				result = frames.UpdateAlreadyClosed
			}
			return nil, nil
		}
		result = frames.UpdateApplied
		ia := *j.Interaction
		detail := map[string]any{"interaction_id": id, "state": how}
		if ans != nil {
			detail["text"] = ans.Text
			if ans.Option != "" {
				detail["option"] = ans.Option
			}
		}
		next := j.edit()
		next.close(id, how)
		if next.State == Pending {
			next.ActivityMS = now
		}
		t := e.write(j, next, now, entry(now, KindInteraction, next, detail))
		return &plan{t: t, change: Change{Event: EventInteractionClosed, Interaction: &ia}}, nil
	})
	return result, err
}

// MatchAnswer applies the answer rule of SPEC 9 to a reply: it answers an interaction with
// options when it equals one of them or contains exactly one of them (as whole words,
// case-insensitive, ignoring punctuation), and one without options when it is not empty. It
// returns the option matched ("" without options).
func MatchAnswer(reply string, options []string) (string, bool) {
	words := answerWords(reply)
	if len(options) == 0 {
		return "", len(words) > 0
	}
	text := " " + strings.Join(words, " ") + " "
	for _, o := range options {
		if ow := answerWords(o); len(ow) > 0 && strings.Join(ow, " ") == strings.TrimSpace(text) {
			return o, true
		}
	}
	var found []string
	for _, o := range options {
		ow := answerWords(o)
		if len(ow) > 0 && strings.Contains(text, " "+strings.Join(ow, " ")+" ") {
			found = append(found, o)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return "", false
}

// answerWords lowercases s and splits it into words, dropping punctuation.
func answerWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
