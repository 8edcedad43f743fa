package permissions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/jobs"
)

func TestRunVerifyCommand(t *testing.T) {
	in := strings.Join([]string{
		`{"action":"buy_tickets","arguments":{"count":2},"ask":"Shall I run buy_tickets with {\"count\":2}? Please say yes or no.","reply":"yes please"}`,
		``,
		`   `,
		`{"action":"buy_tickets","arguments":{"count":2},"ask":"","reply":"yes but make it 3"}`,
		`not json`,
		`{"action":"buy_tickets","arguments":{"count":2}}`,
		`{"arguments":{"count":2},"reply":"yes"}`,
		`{"action":"buy_tickets","arguments":[2],"reply":"yes"}`,
		`{"action":"buy_tickets","reply":"no"}`,
		`{"action":"buy_tickets","arguments":null,"reply":"","expected":"hold","category":"silence_noise"}`,
		`{"action":"buy_tickets","reply":"yes"} {"action":"x"}`,
		"{\"action\":\"buy_tickets\",\"reply\":\"go ahead\"}\r",
		`{"action":"send_money","arguments":{"to":"Alice","amount":25},"reply":"sure"}`, // no final newline
	}, "\n")
	var out bytes.Buffer
	if err := RunVerifyCommand(context.Background(), NewRules(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"verdict":"approve","reason":"clear_approval"}`,
		`{"verdict":"hold","reason":"changed_arguments"}`,
		`{"verdict":"hold","reason":"bad_input: invalid character 'o' in literal null (expecting 'u')"}`,
		`{"verdict":"hold","reason":"bad_input: missing \"reply\""}`,
		`{"verdict":"hold","reason":"bad_input: missing \"action\""}`,
		`{"verdict":"hold","reason":"bad_input: \"arguments\" must be a JSON object"}`,
		`{"verdict":"decline","reason":"refusal"}`,
		`{"verdict":"hold","reason":"empty"}`,
		`{"verdict":"hold","reason":"bad_input: invalid character '{' after top-level value"}`,
		`{"verdict":"approve","reason":"clear_approval"}`,
		`{"verdict":"approve","reason":"clear_approval"}`,
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunVerifyCommandLongLine(t *testing.T) {
	in := `{"action":"a","reply":"` + strings.Repeat("yes ", maxCommandLine/4+10) + "\"}\n" + `{"action":"a","reply":"yes"}` + "\n"
	var out bytes.Buffer
	if err := RunVerifyCommand(context.Background(), NewRules(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := `{"verdict":"hold","reason":"bad_input: line longer than 1048576 bytes"}` + "\n" + `{"verdict":"approve","reason":"clear_approval"}` + "\n"
	if out.String() != want {
		t.Errorf("output %q", out.String())
	}
}

// failingVerifier fails, and even claims an approval while doing so.
type failingVerifier struct{}

func (failingVerifier) Verify(context.Context, Action, string) (Judgement, error) {
	return Judgement{Verdict: jobs.Approve, Reason: "judge_error"}, errors.New("endpoint down")
}

func TestRunVerifyCommandVerifierError(t *testing.T) {
	var out bytes.Buffer
	err := RunVerifyCommand(context.Background(), failingVerifier{}, strings.NewReader(`{"action":"a","reply":"yes"}`), &out)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"verdict":"hold","reason":"judge_error: endpoint down"}` + "\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestRunVerifyCommandStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := RunVerifyCommand(ctx, NewRules(), strings.NewReader(`{"action":"a","reply":"yes"}`), &out)
	if !errors.Is(err, context.Canceled) || out.Len() != 0 {
		t.Errorf("err %v, output %q", err, out.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRunVerifyCommandWriteError(t *testing.T) {
	err := RunVerifyCommand(context.Background(), NewRules(), strings.NewReader(`{"action":"a","reply":"yes"}`), failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err %v", err)
	}
}

// The corpus itself is valid input: one output line per case, in order, with the judgement of
// Verify.
func TestRunVerifyCommandOnCorpus(t *testing.T) {
	data, err := os.ReadFile("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunVerifyCommand(context.Background(), NewRules(), bytes.NewReader(data), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	cases := loadCorpus(t)
	if len(lines) != len(cases) {
		t.Fatalf("%d output lines for %d cases", len(lines), len(cases))
	}
	for i, c := range cases {
		var got Judgement
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		want, _ := NewRules().Verify(context.Background(), Action{Tool: c.Action, Arguments: c.Arguments, Ask: c.Ask}, c.Reply)
		if got != want {
			t.Errorf("line %d: %+v, want %+v", i+1, got, want)
		}
	}
}
