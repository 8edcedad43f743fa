package textagent

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Header names, in the fixed order of SPEC 13: a rendered Content lists its headers in the order
// of this list, whatever the order of the Set calls.
const (
	HeaderInternal           = "internal"
	HeaderWaitOutcome        = "wait_outcome"
	HeaderWaitReason         = "wait_reason"
	HeaderWaitMode           = "wait_mode"
	HeaderOriginalToolCallID = "original_tool_call_id"
	HeaderError              = "error"
	HeaderToolCallID         = "tool_call_id"
	HeaderDurationSeconds    = "duration_seconds"
	HeaderInputAvailable     = "input_available"
	HeaderTimedOut           = "timed_out"
	HeaderAdvice             = "advice"
	HeaderPendingPrompts     = "pending_prompts"
)

// headerOrder is the fixed order of SPEC 13; a header's index here is its slot in Content.
var headerOrder = [...]string{
	HeaderInternal,
	HeaderWaitOutcome,
	HeaderWaitReason,
	HeaderWaitMode,
	HeaderOriginalToolCallID,
	HeaderError,
	HeaderToolCallID,
	HeaderDurationSeconds,
	HeaderInputAvailable,
	HeaderTimedOut,
	HeaderAdvice,
	HeaderPendingPrompts,
}

func headerIndex(name string) int {
	for i, n := range headerOrder {
		if n == name {
			return i
		}
	}
	return -1
}

// Content is one agent.tool_result content (or one MCP text content): zero or more headers and
// an optional body. The zero value is an empty content (no headers, no body). Content is a plain
// value: copying it copies its headers and body, and Set or SetBody on the copy leaves the
// original as it was.
//
// Header values are kept as given and escaped with EscapeHeaderValue when rendered; the body is
// rendered as it is.
type Content struct {
	set     [len(headerOrder)]bool
	values  [len(headerOrder)]string
	body    string
	hasBody bool
}

// Set sets the header name to value, replacing an earlier value of the same header, and returns
// c. The value is escaped (EscapeHeaderValue) when the content is rendered, so no value can add a
// header line or a record. Set panics if name is not one of the Header constants: that is a
// programming error.
func (c *Content) Set(name, value string) *Content {
	i := headerIndex(name)
	if i < 0 {
		panic("textagent: unknown result header " + strconv.Quote(name))
	}
	c.set[i] = true
	c.values[i] = value
	return c
}

// SetBody sets the body of c, replacing an earlier body, and returns c. Even an empty string is a
// body: a content with headers and an empty body renders the separating empty line.
func (c *Content) SetBody(body string) *Content {
	c.body = body
	c.hasBody = true
	return c
}

// Header returns the value of the header name as it was given to Set (unescaped), and whether it
// is set. It returns "", false for a name that is not a Header constant.
func (c Content) Header(name string) (string, bool) {
	i := headerIndex(name)
	if i < 0 || !c.set[i] {
		return "", false
	}
	return c.values[i], true
}

// Body returns the body of c and whether it has one.
func (c Content) Body() (string, bool) {
	return c.body, c.hasBody
}

// IsError reports whether c has an `error` header: an agent.tool_result has kind "error"
// exactly when this is true, and an MCP result has isError: true.
func (c Content) IsError() bool {
	_, ok := c.Header(HeaderError)
	return ok
}

// String renders c in the result text format of SPEC 13: one `name: value` line per header in
// the fixed order of the Header constants, then, if there is a body, one empty line and the body.
// A body-only content is the body alone (no leading empty line); lines end with LF and the text
// has no trailing newline of its own (a body that ends with one keeps it).
//
// A header line is never empty and an escaped value never contains LF or CR, so the first empty
// line ends the headers. A content without headers is indistinguishable from its body — by
// SPEC 13's design, the result kind (or MCP isError) tells an error apart.
func (c Content) String() string {
	var b strings.Builder
	first := true
	for i, name := range headerOrder {
		if !c.set[i] {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(EscapeHeaderValue(c.values[i]))
	}
	if c.hasBody {
		if !first {
			b.WriteString("\n\n")
		}
		b.WriteString(c.body)
	}
	return b.String()
}

const hexDigits = "0123456789abcdef"

// EscapeHeaderValue escapes a header value as SPEC 13 requires: `\` → `\\`, LF → `\n`,
// CR → `\r`, TAB → `\t`, the other C0 controls (U+0000–U+001F) and DEL (U+007F) → `\xNN`, the C1
// controls (U+0080–U+009F), U+2028 and U+2029 → `\uNNNN`, with lowercase hex digits. Every other
// character is kept as it is.
//
// A byte that is not part of valid UTF-8 is escaped as `\xNN` (its own value, so 0x80–0xff here).
// The escaped value is therefore always valid UTF-8, contains no control character, line or
// paragraph separator, and unescapes back to exactly the original bytes: `\xNN` always stands for
// the single byte NN and `\uNNNN` for the UTF-8 encoding of U+NNNN.
func EscapeHeaderValue(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\' {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		switch c {
		case '\\':
			b.WriteString(`\\`)
			i++
			continue
		case '\n':
			b.WriteString(`\n`)
			i++
			continue
		case '\r':
			b.WriteString(`\r`)
			i++
			continue
		case '\t':
			b.WriteString(`\t`)
			i++
			continue
		}
		if c < 0x80 { // other C0 controls and DEL
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1: // invalid UTF-8: one byte
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029':
			b.WriteString(`\u`)
			b.WriteByte(hexDigits[r>>12&0xf])
			b.WriteByte(hexDigits[r>>8&0xf])
			b.WriteByte(hexDigits[r>>4&0xf])
			b.WriteByte(hexDigits[r&0xf])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// OutputBody renders a call's output as the body of a successful result (SPEC 13 Results): a
// JSON string as the string itself, any other JSON value as compact JSON (insignificant white
// space removed; numbers and string escapes kept as written, so 2.5 stays 2.5 and 1e3 stays
// 1e3). An output that is empty or only white space renders as "" (a caller with no output
// should set no body); an output that is not valid JSON, which the frame decoder never lets
// through, is returned as its text with surrounding white space trimmed.
func OutputBody(output json.RawMessage) string {
	trimmed := bytes.TrimSpace(output)
	if len(trimmed) == 0 {
		return ""
	}
	if !json.Valid(trimmed) {
		return string(trimmed)
	}
	if trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err == nil {
			return s
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, trimmed); err != nil {
		return string(trimmed)
	}
	return b.String()
}

// Wait modes of an interrupted wait (header `wait_mode`).
const (
	// WaitModeExact is the wait_mode of an interrupted `wait {"tool_call_id"}`.
	WaitModeExact = "exact"
	// WaitModeAnyBackground is the wait_mode of an interrupted bare `wait {}`.
	WaitModeAnyBackground = "any_background"
)

// Fixed header values of SPEC 13.
const (
	// ValueTrue is the value of the flag headers internal, input_available and timed_out.
	ValueTrue = "true"
	// WaitOutcomeInterrupted is the wait_outcome of an interrupted wait.
	WaitOutcomeInterrupted = "interrupted"
	// WaitReasonActivatingInput is the wait_reason of a wait interrupted by activating input.
	WaitReasonActivatingInput = "activating_input"
)

// Error messages of SPEC 13, for the `error` header (see ErrorResult).
const (
	// MsgResultAlreadyConsumed is the error of a `wait` for a call whose result was consumed.
	MsgResultAlreadyConsumed = "Tool call result already consumed"
	// MsgResultAlreadyWaitedFor is the error of a `wait` for a call another wait already waits for.
	MsgResultAlreadyWaitedFor = "Tool call result is already being waited for"
	// MsgUnknownToolCallID is the error of a `wait` or `cancel` with an unknown id (the result also
	// carries the header tool_call_id).
	MsgUnknownToolCallID = "Unknown tool call id"
	// MsgNoBackgroundToolCall is the error of a bare `wait {}` with nothing completed or running.
	MsgNoBackgroundToolCall = "No background tool call to wait for"
	// MsgBareWaitAlreadyPending is the error of a bare `wait {}` while another one is installed.
	MsgBareWaitAlreadyPending = "A wait for the next background completion is already pending"
	// MsgTimeoutMinutesInvalid is the error of a `wait {"timeout_minutes"}` whose value is not a
	// JSON integer ≥ 1.
	MsgTimeoutMinutesInvalid = "timeout_minutes must be a positive integer"
	// MsgToolCallCanceled is the error of the result of a cancelled call.
	MsgToolCallCanceled = "Tool call canceled"
	// MsgToolCallIDEmpty is the error of a `cancel` with an empty tool_call_id.
	MsgToolCallIDEmpty = "`tool_call_id` must not be empty"
	// MsgToolCallAlreadyDone is the error of a `cancel` of a finished call.
	MsgToolCallAlreadyDone = "Tool call is already done"
	// MsgToolCallAlreadyCanceled is the error of a second `cancel` of the same call.
	MsgToolCallAlreadyCanceled = "Tool call already canceled"
	// MsgToolCallCannotBeCanceled is the error of a `cancel` of a built-in call (`wait`,
	// `status` or `cancel`, running or finished).
	MsgToolCallCannotBeCanceled = "Tool call cannot be canceled"
)

// Other fixed texts of SPEC 13.
const (
	// BodyCancellationRequested is the whole body of a successful `cancel` (not an error).
	BodyCancellationRequested = "Tool cancellation requested"
	// AdviceTimedWaits is the value of the `advice` header on the third consecutive input-wait
	// timeout.
	AdviceTimedWaits = "Consider status(waiting) and event-driven wakeups instead of repeated timed waits."
	// StatusReminderPrompt is the prompt queued by the first substantive tool call of a
	// conversation whose status is not `working`.
	StatusReminderPrompt = "Reminder: when working on a task use `status` tool to acknowledge it."
)

// ErrorResult is the content of a failed result: the header `error: MSG` and no body. A caller
// adds the output as the body (SetBody) when there is one, and any further headers with Set.
func ErrorResult(msg string) Content {
	var c Content
	c.Set(HeaderError, msg)
	return c
}

// Placeholder is the content of an agent.tool_result with kind "background_placeholder" for the
// call callID (the agent's own id):
//
//	internal: true
//
//	Tool call `CALL_ID` is running in the background.
func Placeholder(callID string) Content {
	var c Content
	c.Set(HeaderInternal, ValueTrue)
	c.SetBody("Tool call `" + callID + "` is running in the background.")
	return c
}

// Interrupted is the content of a wait interrupted by activating input: exactly the headers
// `internal: true`, `wait_outcome: interrupted`, `wait_reason: activating_input` and
// `wait_mode: MODE`, and no body. mode is WaitModeExact or WaitModeAnyBackground; Interrupted
// panics on any other mode (a programming error).
func Interrupted(mode string) Content {
	if mode != WaitModeExact && mode != WaitModeAnyBackground {
		panic("textagent: unknown wait mode " + strconv.Quote(mode))
	}
	var c Content
	c.Set(HeaderInternal, ValueTrue)
	c.Set(HeaderWaitOutcome, WaitOutcomeInterrupted)
	c.Set(HeaderWaitReason, WaitReasonActivatingInput)
	c.Set(HeaderWaitMode, mode)
	return c
}

// CompletionPrompt is the internal prompt queued when the background call callID (the agent's own
// id) finishes:
//
//	[internal] Tool call `CALL_ID` completed. Its result is queued; use `wait` to consume it.
func CompletionPrompt(callID string) string {
	return "[internal] Tool call `" + callID + "` completed. Its result is queued; use `wait` to consume it."
}

// MessagePrompt is the prompt an agent.message from the conversation fromConv delivers to its
// target conversation: `Message from CONVERSATION_ID:`, then a line with the text.
func MessagePrompt(fromConv, text string) string {
	return "Message from " + fromConv + ":\n" + text
}

// WatchStatusPrompt is the prompt a parent conversation receives when its child conv reports a
// status (the first report and every update alike):
// `Watched agent CONVERSATION_ID status: STATE on TITLE`.
func WatchStatusPrompt(conv, state, title string) string {
	return "Watched agent " + conv + " status: " + state + " on " + title
}

// WatchFinalPrompt is the prompt a parent conversation receives with the final response of its
// child conv: `Watched agent CONVERSATION_ID final response:`, then a line with the text.
func WatchFinalPrompt(conv, text string) string {
	return "Watched agent " + conv + " final response:\n" + text
}

// InteractionPrompt is the prompt an interaction (SPEC 9) of the call callID (the agent's own id)
// delivers to the call's conversation; the second line only when there are options:
//
//	Tool call `CALL_ID` asks (INTERACTION_ID): PROMPT
//	Options: A, B
func InteractionPrompt(callID, interactionID, prompt string, options []string) string {
	s := "Tool call `" + callID + "` asks (" + interactionID + "): " + prompt
	if len(options) > 0 {
		s += "\nOptions: " + strings.Join(options, ", ")
	}
	return s
}

// durationHeaderAfter is the run time beyond which a result carries duration_seconds.
const durationHeaderAfter = 5 * time.Second

// DurationSeconds is the value of the `duration_seconds` header for a call that ran for d (from
// the call to its end): whole seconds, rounded down. ok is false — no header — unless the call
// ran longer than 5 s (d > 5s; exactly 5 s carries none).
func DurationSeconds(d time.Duration) (value string, ok bool) {
	if d <= durationHeaderAfter {
		return "", false
	}
	return strconv.FormatInt(int64(d/time.Second), 10), true
}

// PendingPrompts is the value of the MCP `pending_prompts` header (SPEC 14): a JSON array of the
// prompt texts, in order. It is compact JSON without HTML escaping (<, > and & stay as they
// are); encoding/json still writes U+2028 and U+2029 as \u2028 and \u2029 and replaces invalid
// UTF-8 with U+FFFD. nil renders as []. Like every header value it is escaped once more when the
// content is rendered (Set), so a client unescapes the header value, then parses the JSON.
func PendingPrompts(prompts []string) string {
	if prompts == nil {
		prompts = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(prompts); err != nil {
		// Encoding a []string cannot fail.
		panic("textagent: encoding pending prompts: " + err.Error())
	}
	return strings.TrimSuffix(b.String(), "\n")
}
