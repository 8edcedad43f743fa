package permissions

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/jobs"
)

// corpusCase is one labelled line of testdata/corpus.jsonl.
type corpusCase struct {
	Action    string          `json:"action"`
	Arguments json.RawMessage `json:"arguments"`
	Ask       string          `json:"ask"`
	Reply     string          `json:"reply"`
	Expected  jobs.Verdict    `json:"expected"`
	Category  string          `json:"category"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []corpusCase
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus.jsonl:%d: %v", line, err)
		}
		switch c.Expected {
		case jobs.Approve, jobs.Hold, jobs.Decline:
		default:
			t.Fatalf("corpus.jsonl:%d: expected %q", line, c.Expected)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// The categories the corpus must cover, and how many cases each needs at least.
var corpusMinimum = map[string]int{
	"clear_approval": 20, "clear_refusal": 60, "condition": 20, "changed_arguments": 20,
	"hypothetical": 20, "question": 20, "reported_speech": 20, "instruction": 20, "negation": 20,
	"sarcasm": 20, "silence_noise": 20, "ambiguous": 20, "filler_approval": 10,
	"polite_approval": 10, "asr_artefact": 10, "repeated_words": 10, "casing_punctuation": 10,
}

// TestCorpus runs the rule-based verifier on every labelled case, logs the confusion matrix per
// category (go test -run TestCorpus -v ./permissions/) and fails on any false approval, on any
// decline of a reply that is not a refusal (a decline is terminal: the caller is not asked
// again), or when fewer than 95% of the approvals are approved or fewer than 95% of the refusals
// declined.
func TestCorpus(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 400 {
		t.Errorf("corpus has %d cases, want at least 400", len(cases))
	}
	perCategory := map[string]int{}
	expected := map[jobs.Verdict]int{}
	for _, c := range cases {
		perCategory[c.Category]++
		expected[c.Expected]++
	}
	for cat, n := range corpusMinimum {
		if perCategory[cat] < n {
			t.Errorf("category %s has %d cases, want at least %d", cat, perCategory[cat], n)
		}
	}
	if expected[jobs.Approve] < 60 || expected[jobs.Decline] < 60 {
		t.Errorf("corpus has %d approvals and %d refusals, want at least 60 of each", expected[jobs.Approve], expected[jobs.Decline])
	}

	r := NewRules()
	m := newConfusion()
	var misses []string
	for _, c := range cases {
		j, err := r.Verify(context.Background(), Action{Tool: c.Action, Arguments: c.Arguments, Ask: c.Ask}, c.Reply)
		if err != nil {
			t.Fatal(err)
		}
		m.add(c.Category, c.Expected, j.Verdict)
		if j.Verdict == jobs.Approve && c.Expected != jobs.Approve {
			t.Errorf("FALSE APPROVAL [%s] %s %s: %q (want %s)", c.Category, c.Action, c.Arguments, c.Reply, c.Expected)
		}
		if j.Verdict == jobs.Decline && c.Expected != jobs.Decline {
			t.Errorf("FALSE DECLINE [%s] %s %s: %q (want %s)", c.Category, c.Action, c.Arguments, c.Reply, c.Expected)
		}
		if j.Verdict != c.Expected {
			misses = append(misses, fmt.Sprintf("%-18s %-8s→ %-8s %-18s %q (%s)", c.Category, c.Expected, j.Verdict, j.Reason, c.Reply, c.Action))
		}
	}
	t.Log("\n" + m.String())
	t.Logf("misses (category, expected → got, reason, reply):\n%s", strings.Join(misses, "\n"))

	// The targets of the issue, on their own categories: clear approvals approved, clear
	// refusals declined.
	if c := m.cells["clear_approval"]; c == nil {
		t.Error("no clear_approval cases")
	} else if got, want := c.rate(jobs.Approve), 0.95; got < want {
		t.Errorf("approved %.1f%% of the clear approvals, want at least %.0f%%", 100*got, 100*want)
	}
	if c := m.cells["clear_refusal"]; c == nil {
		t.Error("no clear_refusal cases")
	} else if got, want := c.rate(jobs.Decline), 0.95; got < want {
		t.Errorf("declined %.1f%% of the clear refusals, want at least %.0f%%", 100*got, 100*want)
	}
	// And on every case expected to be approved or declined, whatever its category.
	total := m.total()
	if got, want := total.rate(jobs.Approve), 0.95; got < want {
		t.Errorf("approved %.1f%% of the approvals, want at least %.0f%%", 100*got, 100*want)
	}
	if got, want := total.rate(jobs.Decline), 0.95; got < want {
		t.Errorf("declined %.1f%% of the refusals, want at least %.0f%%", 100*got, 100*want)
	}
}

// confusion counts verdicts per category: cells[category][expected][got].
type confusion struct {
	cells map[string]*matrix
}

type matrix [3][3]int

var verdicts = []jobs.Verdict{jobs.Approve, jobs.Hold, jobs.Decline}

func verdictIndex(v jobs.Verdict) int {
	for i, x := range verdicts {
		if x == v {
			return i
		}
	}
	panic("unknown verdict " + string(v))
}

func newConfusion() *confusion { return &confusion{cells: map[string]*matrix{}} }

func (c *confusion) add(category string, expected, got jobs.Verdict) {
	m := c.cells[category]
	if m == nil {
		m = &matrix{}
		c.cells[category] = m
	}
	m[verdictIndex(expected)][verdictIndex(got)]++
}

func (c *confusion) total() *matrix {
	var t matrix
	for _, m := range c.cells {
		for i := range m {
			for j := range m[i] {
				t[i][j] += m[i][j]
			}
		}
	}
	return &t
}

// rate is the share of the cases expected to be v that got v.
func (m *matrix) rate(v jobs.Verdict) float64 {
	i := verdictIndex(v)
	n := m[i][0] + m[i][1] + m[i][2]
	if n == 0 {
		return 1
	}
	return float64(m[i][i]) / float64(n)
}

// String renders one row per category and expected verdict: how many got approve, hold and
// decline, and the share that got the expected verdict. Rows with no cases are left out.
func (c *confusion) String() string {
	var b strings.Builder
	cats := make([]string, 0, len(c.cells))
	for k := range c.cells {
		cats = append(cats, k)
	}
	sort.Strings(cats)
	fmt.Fprintf(&b, "| %-18s | %-8s | %7s | %4s | %7s | %7s |\n", "category", "expected", "approve", "hold", "decline", "correct")
	fmt.Fprintf(&b, "|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 20), strings.Repeat("-", 10), strings.Repeat("-", 8)+":", strings.Repeat("-", 5)+":", strings.Repeat("-", 8)+":", strings.Repeat("-", 8)+":")
	row := func(name string, m *matrix) {
		for i, v := range verdicts {
			n := m[i][0] + m[i][1] + m[i][2]
			if n == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %-18s | %-8s | %7d | %4d | %7d | %6.1f%% |\n", name, v, m[i][0], m[i][1], m[i][2], 100*float64(m[i][i])/float64(n))
		}
	}
	for _, k := range cats {
		row(k, c.cells[k])
	}
	row("**all**", c.total())
	return b.String()
}
