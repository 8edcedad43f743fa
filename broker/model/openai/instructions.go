package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/backchannel-io/backchannel/broker/model"
)

// DefaultPersona is the session instructions when neither the session nor Options give any.
const DefaultPersona = "You are a friendly, concise voice assistant on a live call."

// AgentRules end every session's instructions: how a voice agent of the broker behaves.
const AgentRules = `Rules of this call:
- Keep what you say short and natural: this is a spoken conversation.
- Some tools run as background jobs. When a tool's output says a job runs in the background, do not say it has finished or make up a result; the system will ask you to announce its progress and its outcome.
- The system adds notes to the conversation (the open jobs, progress, partial results, the caller's answers). Use them to answer questions about jobs, but do not read them out on your own.
- When the caller asks to stop or cancel a job, call cancel_job with the job's reference from the open jobs list.
- Never answer a question for the caller and never assume the caller agreed to something: only the caller's own words give permission.`

// WordingPrefix starts the last line of the instructions of every response the adapter
// requests: a Go-quoted sentence that says what the response is to convey (the sentence the
// scripted model would say). A language model takes it as a suggestion; the simulator says
// it as it is.
const WordingPrefix = "Say something like: "

// narrationPreamble starts the instructions of every requested response.
const narrationPreamble = "The system asks you to speak to the caller now about exactly one thing, described below. Say it in your own words, in one or two short sentences, then stop. Do not call any tool and do not mention these instructions."

// maxInstructionValue bounds an output, error or argument quoted in instructions.
const maxInstructionValue = 8 << 10

// sessionInstructions are the session's instructions: the session's own (or the default
// ones), then the agent rules.
func sessionInstructions(session, fallback string) string {
	base := strings.TrimSpace(session)
	if base == "" {
		base = strings.TrimSpace(fallback)
	}
	if base == "" {
		base = DefaultPersona
	}
	return base + "\n\n" + AgentRules
}

// requestInstructions tell the model to voice exactly one request (SPEC 8, 9, 12). The
// instructions of a response replace the session's for that response, so they repeat them
// first: the persona and the rules hold for narrations too.
func requestInstructions(session string, r model.Request) string {
	return session + "\n\n" + narrationPreamble + "\n\n" + what(r) + "\n\n" + WordingPrefix + strconv.Quote(clip(model.Wording(r), maxInstructionValue))
}

// what describes the one thing a request voices.
func what(r model.Request) string {
	label := strconv.Quote(r.Label)
	switch r.Kind {
	case model.HandOff:
		return fmt.Sprintf("Tell the caller that %s has started and runs in the background, that the conversation can go on meanwhile, and that you will tell them when it is done.", label)
	case model.Milestone:
		return fmt.Sprintf("Give the caller a short progress update on the background job %s: %s", label, valueText(r.Segment))
	case model.InteractionAsk:
		s := "A background job needs the caller's decision. Ask the caller this question: " + r.Prompt
		if len(r.Options) > 0 {
			s += "\nThe options are: " + strings.Join(r.Options, "; ") + ". Read them out and ask the caller to choose one."
		}
		return s + "\nThen stop and wait for the caller's answer; never answer it yourself."
	case model.Completion:
		switch r.State {
		case "failed":
			return fmt.Sprintf("Tell the caller that the background job %s failed, with this error: %s", label, clip(r.Error, maxInstructionValue))
		case "timed_out":
			return fmt.Sprintf("Tell the caller that the background job %s timed out without a result.", label)
		}
		return fmt.Sprintf("Tell the caller that the background job %s is done, and give them its result: %s", label, valueText(r.Output))
	case model.Inject:
		return "Tell the caller this: " + clip(r.Text, maxInstructionValue)
	case model.PermissionAsk:
		return fmt.Sprintf("The tool %s may only run with the arguments %s if the caller clearly agrees. Ask the caller, in your own words, whether you should go ahead with it, and say what it will do. Only ask: do not answer for the caller, do not assume their answer, and do not run it.", strconv.Quote(r.Name), compactText(r.Args))
	case model.Clarification:
		return fmt.Sprintf("The caller's reply to whether the tool %s should run with the arguments %s was not a clear yes or no. Ask again for a clear yes or no. Do not answer for the caller and do not run it.", strconv.Quote(r.Name), compactText(r.Args))
	case model.Decline:
		return fmt.Sprintf("The caller did not give permission. Tell them briefly that you will not run %s.", strconv.Quote(r.Name))
	}
	return "Tell the caller this: " + clip(r.Text, maxInstructionValue)
}

// clarifyInstructions answer a caller turn that did not match the open interaction (SPEC 9),
// after the session's instructions.
func clarifyInstructions(session string, options []string) string {
	return session + "\n\nThe caller's last reply did not clearly choose one of the options of the open question. Unless the caller asked for something else, ask them to choose one of these options: " +
		strings.Join(options, "; ") + ".\n\n" + WordingPrefix + strconv.Quote("Please choose one of: "+strings.Join(options, ", ")+".")
}

// valueText is model.JSONText, clipped for instructions.
func valueText(raw json.RawMessage) string { return clip(model.JSONText(raw), maxInstructionValue) }

// compactText is model.CompactJSON, clipped for instructions.
func compactText(raw json.RawMessage) string {
	return clip(model.CompactJSON(raw), maxInstructionValue)
}
