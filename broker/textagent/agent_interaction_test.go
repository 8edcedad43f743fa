package textagent

import (
	"errors"
	"reflect"
	"testing"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// SPEC 9 text sessions: an interaction reaches the call's conversation as the prompt
// "Tool call `CALL_ID` asks (INTERACTION_ID): PROMPT" and, with options, "Options: A, B".
func TestAgentInteractionPrompt(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.call(child, "s", "status", `{"state":"working","title":"t"}`)
	h.call(RootConversation, "c1", "book", `{}`)
	h.call(child, "k1", "book", `{}`)
	h.skip()
	h.a.InteractionOpened(h.bid(RootConversation, "c1"), &jobs.Interaction{ID: "ia_1", Prompt: "Which seat?", Options: []string{"Window", "Aisle"}})
	h.expect(agP(RootConversation, "Tool call `c1` asks (ia_1): Which seat?\nOptions: Window, Aisle"))
	h.a.InteractionOpened(h.bid(child, "k1"), &jobs.Interaction{ID: "ia_2", Prompt: "Your name?"})
	h.expect(agP(child, "Tool call `k1` asks (ia_2): Your name?"))
	// During a turn it waits for the turn's end.
	h.turnStart(RootConversation)
	h.a.InteractionOpened(h.bid(RootConversation, "c1"), &jobs.Interaction{ID: "ia_3", Prompt: "Sure?", Options: []string{"yes", "no"}})
	h.expectNone()
	h.turnEnd(RootConversation)
	h.expect(agP(RootConversation, "Tool call `c1` asks (ia_3): Sure?\nOptions: yes, no"))
	// An unknown job's interaction goes nowhere.
	h.a.InteractionOpened("call_nope", &jobs.Interaction{ID: "ia_4", Prompt: "?"})
	h.expectNone()
}

// agent.interaction_answer is matched by the rule of SPEC 9 (the option field, equal to an
// option, containing exactly one, or any non-empty text without options) and passed on with
// AnswerInteraction.
func TestAgentInteractionAnswer(t *testing.T) {
	tests := []struct {
		name       string
		options    []string
		option     string
		text       string
		wantOption string
		match      bool
	}{
		{"option field", []string{"Window", "Aisle"}, "Aisle", "the second one", "Aisle", true},
		{"option field, case and space", []string{"Window", "Aisle"}, " aisle ", "x", "Aisle", true},
		{"option field not an option, text equal", []string{"Window", "Aisle"}, "Middle", "window", "Window", true},
		{"equal", []string{"Window", "Aisle"}, "", "Window", "Window", true},
		{"equal, case and punctuation", []string{"Window", "Aisle"}, "", "AISLE!", "Aisle", true},
		{"contains exactly one", []string{"Window", "Aisle"}, "", "I'd like the window, please", "Window", true},
		{"contains both", []string{"Window", "Aisle"}, "", "window or aisle", "", false},
		{"contains none", []string{"Window", "Aisle"}, "", "middle", "", false},
		{"multi-word option", []string{"Next week", "Today"}, "", "make it next week.", "Next week", true},
		{"no options, any text", nil, "", "Ada Lovelace", "", true},
		{"no options, empty", nil, "", "", "", false},
		{"no options, spaces", nil, "", "   ", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAg(t, Options{})
			h.call(RootConversation, "c1", "book", `{}`)
			bid := h.bid(RootConversation, "c1")
			h.a.InteractionOpened(bid, &jobs.Interaction{ID: "ia_1", Prompt: "?", Options: tt.options})
			h.skip()
			h.handle(&frames.AgentInteractionAnswer{Request: frames.Request{ID: "ans"}, ConversationID: RootConversation,
				InteractionID: "ia_1", Option: tt.option, Text: tt.text})
			if !tt.match {
				h.expect(agE("ans", frames.CodeBadFrame))
				if len(h.answers) != 0 {
					t.Errorf("AnswerInteraction = %+v", h.answers)
				}
				// Unmatched: still open, a matching answer goes through.
				if len(tt.options) > 0 {
					h.handle(&frames.AgentInteractionAnswer{ConversationID: RootConversation, InteractionID: "ia_1", Text: tt.options[0]})
					if len(h.answers) != 1 || h.answers[0].option != tt.options[0] {
						t.Errorf("second answer: %+v", h.answers)
					}
				}
				return
			}
			h.expectNone()
			want := []agAnswer{{bid, "ia_1", tt.wantOption, tt.text}}
			if !reflect.DeepEqual(h.answers, want) {
				t.Errorf("AnswerInteraction = %+v, want %+v", h.answers, want)
			}
		})
	}
}

// Answers are scoped: an unknown interaction, another conversation's, one already answered or
// closed; a refusal of the Env is an error frame.
func TestAgentInteractionAnswerErrors(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	h.call(RootConversation, "c1", "book", `{}`)
	bid := h.bid(RootConversation, "c1")
	h.a.InteractionOpened(bid, &jobs.Interaction{ID: "ia_1", Prompt: "?", Options: []string{"A", "B"}})
	h.a.InteractionOpened(bid, &jobs.Interaction{ID: "ia_2", Prompt: "?"})
	h.skip()
	answer := func(ref, conv, ia, text string) {
		h.handle(&frames.AgentInteractionAnswer{Request: frames.Request{ID: ref}, ConversationID: conv, InteractionID: ia, Text: text})
	}
	answer("e1", RootConversation, "ia_nope", "A")
	answer("e2", child, "ia_1", "A")
	answer("e3", "conv_nope", "ia_1", "A")
	h.expect(agE("e1", frames.CodeBadFrame), agE("e2", frames.CodeBadFrame), agE("e3", frames.CodeNotFound))
	answer("ok", RootConversation, "ia_1", "A")
	h.expectNone()
	answer("e4", RootConversation, "ia_1", "A")
	h.expect(agE("e4", frames.CodeBadFrame))
	h.a.InteractionClosed("ia_2")
	answer("e5", RootConversation, "ia_2", "anything")
	h.expect(agE("e5", frames.CodeBadFrame))
	if len(h.answers) != 1 {
		t.Errorf("AnswerInteraction = %+v", h.answers)
	}
	h.a.InteractionOpened(bid, &jobs.Interaction{ID: "ia_3", Prompt: "?"})
	h.skip()
	h.answerResult = frames.UpdateAlreadyClosed
	answer("e6", RootConversation, "ia_3", "x")
	h.expect(agE("e6", frames.CodeBadFrame))
	h.a.InteractionOpened(bid, &jobs.Interaction{ID: "ia_4", Prompt: "?"})
	h.skip()
	h.answerResult, h.answerErr = frames.UpdateApplied, errors.New("store down")
	answer("e7", RootConversation, "ia_4", "x")
	h.expect(agE("e7", frames.CodeBadFrame))
}
