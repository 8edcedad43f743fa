package permissions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/backchannel-io/backchannel/jobs"
)

// maxCommandLine bounds one input line of RunVerifyCommand.
const maxCommandLine = 1 << 20

// verifyRequest is one input line of RunVerifyCommand.
type verifyRequest struct {
	Action    *string         `json:"action"`
	Arguments json.RawMessage `json:"arguments"`
	Ask       string          `json:"ask"`
	Reply     *string         `json:"reply"`
}

// RunVerifyCommand is `backchannel verify-permission` (SPEC 12): it reads JSON lines
// {"action", "arguments", "ask", "reply"} from in and writes one JSON line {"verdict", "reason"}
// per input line to out, in order. Blank lines are skipped. Other fields are ignored, so a line
// of testdata/corpus.jsonl is valid input.
//
// "action" (the tool name) and "reply" (possibly "") are required; "arguments", when present,
// must be a JSON object. A line that is not valid gets {"verdict":"hold","reason":"bad_input:
// ..."} and processing continues. When the verifier fails the line gets its judgement, which is
// never an approval, with the error appended to the reason ("judge_error: ...").
//
// A nil v means the rule-based verifier. RunVerifyCommand returns nil at the end of in, ctx's
// error when ctx ends, or the error of reading in or writing out.
func RunVerifyCommand(ctx context.Context, v Verifier, in io.Reader, out io.Writer) error {
	if v == nil {
		v = NewRules()
	}
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, tooLong, err := readLine(r)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("permissions: read input: %w", err)
		}
		if tooLong || len(bytes.TrimSpace(line)) > 0 {
			j := verifyLine(ctx, v, line, tooLong)
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			enc, merr := json.Marshal(j)
			if merr != nil {
				return fmt.Errorf("permissions: encode judgement: %w", merr)
			}
			if _, werr := out.Write(append(enc, '\n')); werr != nil {
				return fmt.Errorf("permissions: write output: %w", werr)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// verifyLine judges one input line.
func verifyLine(ctx context.Context, v Verifier, line []byte, tooLong bool) Judgement {
	bad := func(msg string) Judgement { return Judgement{Verdict: jobs.Hold, Reason: "bad_input: " + msg} }
	if tooLong {
		return bad(fmt.Sprintf("line longer than %d bytes", maxCommandLine))
	}
	var req verifyRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return bad(err.Error())
	}
	switch {
	case req.Action == nil || *req.Action == "":
		return bad(`missing "action"`)
	case req.Reply == nil:
		return bad(`missing "reply"`)
	}
	args := bytes.TrimSpace(req.Arguments)
	if len(args) > 0 && !bytes.Equal(args, []byte("null")) && args[0] != '{' {
		return bad(`"arguments" must be a JSON object`)
	}
	j, err := v.Verify(ctx, Action{Tool: *req.Action, Arguments: req.Arguments, Ask: req.Ask}, *req.Reply)
	if err != nil {
		if j.Reason == "" {
			j.Reason = "verifier_error"
		}
		return Judgement{Verdict: jobs.Hold, Reason: j.Reason + ": " + err.Error()}
	}
	return j
}

// readLine reads one line without its line ending. A line longer than maxCommandLine is read to
// its end and discarded (tooLong). At the end of input it returns the last line, if any, with
// io.EOF.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := r.ReadLine()
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > maxCommandLine {
				tooLong, line = true, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && (len(line) > 0 || tooLong) {
				return line, tooLong, nil
			}
			return line, tooLong, err
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}
