package permissions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/backchannel-io/backchannel/jobs"
)

// FuzzRules checks the invariants of the rule-based verifier on any reply and any action:
// it never panics; it is deterministic; Veto never approves and agrees with Verify; and it never
// approves a reply that is empty, contains a question mark or a double quote, or contains a
// negation word or "if"/"unless" (found here independently of the verifier's own normalization).
//
//	go test -run=NONE -fuzz=FuzzRules -fuzztime=60s ./permissions/
func FuzzRules(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.Action, string(c.Arguments), c.Reply)
	}
	for _, s := range []string{"yes?", "yes, don't", "ye's", "no'", "yes “no”", "yes\u200bno", "don\u02bct", "YES N'T", "yes 25k", "ok ay if"} {
		f.Add("send_money", `{"to":"Alice","amount":25}`, s)
	}
	r := NewRules()
	f.Fuzz(func(t *testing.T, tool, args, reply string) {
		a := Action{Tool: tool, Arguments: json.RawMessage(args)}
		j, err := r.Verify(context.Background(), a, reply)
		if err != nil {
			t.Fatal(err)
		}
		switch j.Verdict {
		case jobs.Approve, jobs.Hold, jobs.Decline:
		default:
			t.Fatalf("verdict %q", j.Verdict)
		}
		if j.Reason == "" {
			t.Fatal("empty reason")
		}
		if again, _ := r.Verify(context.Background(), a, reply); again != j {
			t.Fatalf("not deterministic: %v then %v", j, again)
		}
		v, vetoed := r.Veto(a, reply)
		if vetoed && (v.Verdict == jobs.Approve || v != j) {
			t.Fatalf("Veto %v (%v), Verify %v", v, vetoed, j)
		}
		if j.Verdict != jobs.Approve {
			return
		}
		if vetoed {
			t.Fatalf("approved a vetoed reply %q", reply)
		}
		if strings.TrimSpace(reply) == "" || strings.ContainsAny(reply, `?"`) {
			t.Fatalf("approved %q", reply)
		}
		if w, ok := forbiddenWord(reply); ok {
			t.Fatalf("approved %q, which contains %q", reply, w)
		}
	})
}

// forbiddenWord finds a negation or a condition word in s the simple way: lowercase, drop
// apostrophes, split on everything that is not a letter or a digit.
func forbiddenWord(s string) (string, bool) {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune("'\u2019\u2018\u02bc\u02b9\u00b4`\u2032\uff07\u201b", r) {
			return -1
		}
		return r
	}, s)
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if forbidden[w] {
			return w, true
		}
	}
	return "", false
}

var forbidden = wordSet(`no not never nope nah nay none nothing neither nor nobody negative cannot
	dont doesnt didnt cant wont isnt arent wasnt werent shouldnt wouldnt couldnt havent hasnt hadnt
	aint mustnt neednt shant if unless`)
