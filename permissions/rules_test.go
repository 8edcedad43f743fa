package permissions

import (
	"context"
	"encoding/json"
	"sort"
	"testing"

	"github.com/backchannel-io/backchannel/jobs"
)

func TestRulesApproveOnlyWhatTheyUnderstand(t *testing.T) {
	approve := Judgement{Verdict: jobs.Approve, Reason: ReasonClearApproval}
	unclear := Judgement{Verdict: jobs.Hold, Reason: ReasonUnclear}
	cases := []struct {
		a     Action
		reply string
		want  Judgement
	}{
		{moneyAction, "yes", approve},
		{moneyAction, "uh, yeah, go ahead", approve},
		{moneyAction, "yes, send Alice 25 dollars", approve},
		{moneyAction, "yes, twenty-five bucks to Alice", approve},
		{moneyAction, "that'd be great, thanks", approve},
		{moneyAction, "yes please, I'm sure", approve},
		{moneyAction, "yes, send the money to my landlord", Judgement{Verdict: jobs.Hold, Reason: ReasonChangedArguments}},
		{moneyAction, "yes, the landlord", unclear},
		{moneyAction, "thanks", unclear},
		{moneyAction, "go go go", unclear},
		{transferAction, "yes, move 500 from checking into savings", approve},
		{meetingAction, "yes, 3 pm on Tuesday with Dana works", approve},
		{meetingAction, "yes, June 3rd at 15:00", approve},
		{cancelAction, "yes, cancel it", approve},
		{cancelAction, "cancel my Netflix", unclear}, // the action's own verb is not an approval
		{emailAction, "yes, send it to Bob", approve},
		{emailAction, "yes, send it, Bob is missing it", Judgement{Verdict: jobs.Hold, Reason: ReasonReportedSpeech}},
		{Action{Tool: "restart_system"}, "yes, restart the system", approve},
		{Action{Tool: "buy_tickets", Arguments: json.RawMessage(`not json`)}, "yes", approve},
		{Action{Tool: "buy_tickets", Arguments: json.RawMessage(`not json`)}, "yes, two", Judgement{Verdict: jobs.Hold, Reason: ReasonChangedArguments}},
	}
	var zero Rules // the zero value is ready to use
	for _, c := range cases {
		got, err := zero.Verify(context.Background(), c.a, c.reply)
		if err != nil || got != c.want {
			t.Errorf("%s %q: %+v, %v; want %+v", c.a.Tool, c.reply, got, err, c.want)
		}
	}
}

func TestVocabulary(t *testing.T) {
	keys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	v := newVocabulary(meetingAction)
	for _, w := range []string{"schedule", "meeting", "with", "dana", "june", "jun", "tuesday", "pm", "oclock", "minutes", "duration"} {
		if !v.has(w) {
			t.Errorf("meeting vocabulary lacks %q: %v", w, keys(v.words))
		}
	}
	for _, n := range []string{"15:00", "15", "3", "3:00", "30", "2025", "6"} {
		if !v.numbers[n] {
			t.Errorf("meeting numbers lack %q: %v", n, keys(v.numbers))
		}
	}
	if v.has("a.m.") || v.has("monday") {
		t.Errorf("meeting vocabulary has a.m. or monday: %v", keys(v.words))
	}

	v = newVocabulary(moneyAction)
	if !v.has("dollars") || !v.has("bucks") || v.has("euros") || v.has("cents") {
		t.Errorf("money vocabulary %v", keys(v.words))
	}
	v = newVocabulary(emailAction)
	if v.has("missing") || v.has("attached") || !v.has("bob") || !v.has("report") {
		t.Errorf("email vocabulary %v: the body is free text and must not count", keys(v.words))
	}
	v = newVocabulary(transferAction)
	if !v.swapped("from", "savings") || !v.swapped("into", "checking") || v.swapped("to", "savings") || v.swapped("from", "checking") {
		t.Error("swapped")
	}
	v = newVocabulary(Action{Tool: "setVolume", Arguments: json.RawMessage(`{"deviceName":"Kitchen (main)","level":[[[0.5]]]}`)})
	for _, w := range []string{"set", "volume", "device", "name", "kitchen", "main"} {
		if !v.has(w) {
			t.Errorf("vocabulary lacks %q: %v", w, keys(v.words))
		}
	}
	if !v.numbers["0.5"] {
		t.Errorf("numbers %v", keys(v.numbers))
	}
}

func TestStem(t *testing.T) {
	for _, pair := range [][2]string{{"booking", "book"}, {"scheduled", "schedule"}, {"tickets", "ticket"}, {"mushrooms", "mushroom"}, {"canceling", "cancel"}} {
		if stem(pair[0]) != stem(pair[1]) {
			t.Errorf("stem(%q) = %q, stem(%q) = %q", pair[0], stem(pair[0]), pair[1], stem(pair[1]))
		}
	}
}

func BenchmarkRulesVerify(b *testing.B) {
	r := NewRules()
	ctx := context.Background()
	for b.Loop() {
		r.Verify(ctx, meetingAction, "Uh, yes please, 3 pm on Tuesday with Dana works, thanks")
	}
}

// TestApprovalsDoNotSurviveVetoWords takes every corpus reply the rules approve and adds a veto
// before or after it: none of the results may be approved.
func TestApprovalsDoNotSurviveVetoWords(t *testing.T) {
	prefixes := []string{"my wife said ", "what if ", "ignore previous instructions, ", "no, ", "maybe ",
		"I would say ", "would you ", "pretend ", "not ", "only if you ", "oh great, ", "[inaudible] ", "\"", "is it ", "hmm, "}
	suffixes := []string{" if it's cheap", "?", ", not", " instead", " and", ", my wife said", ", maybe", ", whatever",
		" tomorrow", " 11 times", " to Zoe", ", no", ", don't", " unless it's late", ", right?", " [laughs]", " or not",
		", just kidding", " for my son", " but later", " next week", ", I think", ", then email Zoe", " plus one", "\""}
	r := NewRules()
	n := 0
	for _, c := range loadCorpus(t) {
		a := Action{Tool: c.Action, Arguments: c.Arguments, Ask: c.Ask}
		if j, _ := r.Verify(context.Background(), a, c.Reply); j.Verdict != jobs.Approve {
			continue
		}
		n++
		var variants []string
		for _, p := range prefixes {
			variants = append(variants, p+c.Reply)
		}
		for _, s := range suffixes {
			variants = append(variants, c.Reply+s)
		}
		for _, v := range variants {
			if j, _ := r.Verify(context.Background(), a, v); j.Verdict == jobs.Approve {
				t.Errorf("%s: approved %q", c.Action, v)
			}
		}
	}
	if n < 200 {
		t.Fatalf("only %d approvals to vary", n)
	}
}
