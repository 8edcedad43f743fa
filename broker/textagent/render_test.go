package textagent

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEscapeHeaderValue(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "true", "true"},
		{"spaces kept", " a b ", " a b "},
		{"backslash", `a\b`, `a\\b`},
		{"backslash n is not a newline", `\n`, `\\n`},
		{"LF", "a\nb", `a\nb`},
		{"CR", "a\rb", `a\rb`},
		{"CRLF", "a\r\nb", `a\r\nb`},
		{"TAB", "a\tb", `a\tb`},
		{"NUL", "\x00", `\x00`},
		{"SOH", "\x01", `\x01`},
		{"VT", "\v", `\x0b`},
		{"FF", "\f", `\x0c`},
		{"ESC", "\x1b[31m", `\x1b[31m`},
		{"US", "\x1f", `\x1f`},
		{"DEL", "\x7f", `\x7f`},
		{"header injection", "x\nerror: y", `x\nerror: y`},
		{"record injection", "x\n\nbody", `x\n\nbody`},
		{"U+0080", "\u0080", `\u0080`},
		{"U+0085 NEL", "a\u0085b", `a\u0085b`},
		{"U+009F", "\u009f", `\u009f`},
		{"U+00A0 kept", "\u00a0", "\u00a0"},
		{"U+2028", "a\u2028b", `a\u2028b`},
		{"U+2029", "a\u2029b", `a\u2029b`},
		{"U+2027 kept", "\u2027", "\u2027"},
		{"U+202A kept", "\u202a", "\u202a"},
		{"non-ASCII kept", "héllo 世界 😀", "héllo 世界 😀"},
		{"U+FFFD kept", "\ufffd", "\ufffd"},
		{"invalid byte", "a\xffb", `a\xffb`},
		{"lone continuation byte", "\x80", `\x80`},
		{"truncated sequence", "\xe2\x80", `\xe2\x80`},
		{"encoded C1 as bytes", "\xc2\x85", `\u0085`},
		{"overlong slash", "\xc0\xaf", `\xc0\xaf`},
		{"surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"mixed", "\\\n\r\t\x00\x7f\u0085\u2028\u2029", `\\\n\r\t\x00\x7f\u0085\u2028\u2029`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EscapeHeaderValue(tt.in); got != tt.want {
				t.Errorf("EscapeHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEscapeHeaderValueAllASCII(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		got := EscapeHeaderValue(string(rune(c)))
		switch {
		case c == '\\' || c == '\n' || c == '\r' || c == '\t':
			if len(got) != 2 || got[0] != '\\' {
				t.Errorf("%#02x: got %q, want a two-character escape", c, got)
			}
		case c < 0x20 || c == 0x7f:
			want := `\x` + string(hexDigits[c>>4]) + string(hexDigits[c&0xf])
			if got != want {
				t.Errorf("%#02x: got %q, want %q", c, got, want)
			}
		default:
			if got != string(rune(c)) {
				t.Errorf("%#02x: got %q, want it kept", c, got)
			}
		}
	}
}

func TestContentString(t *testing.T) {
	tests := []struct {
		name string
		c    func() Content
		want string
	}{
		{"zero", func() Content { return Content{} }, ""},
		{"empty body only", func() Content { var c Content; c.SetBody(""); return c }, ""},
		{"body only", func() Content {
			var c Content
			c.SetBody("hello\nworld")
			return c
		}, "hello\nworld"},
		{"body keeps its trailing newline", func() Content {
			var c Content
			c.SetBody("x\n")
			return c
		}, "x\n"},
		{"header only", func() Content {
			var c Content
			c.Set(HeaderTimedOut, "true")
			return c
		}, "timed_out: true"},
		{"two headers", func() Content {
			var c Content
			c.Set(HeaderError, "boom").Set(HeaderToolCallID, "c1")
			return c
		}, "error: boom\ntool_call_id: c1"},
		{"headers and body", func() Content {
			var c Content
			c.Set(HeaderError, "boom").Set(HeaderDurationSeconds, "7").SetBody("partial\noutput")
			return c
		}, "error: boom\nduration_seconds: 7\n\npartial\noutput"},
		{"header and empty body", func() Content {
			var c Content
			c.Set(HeaderInternal, "true").SetBody("")
			return c
		}, "internal: true\n\n"},
		{"empty header value", func() Content {
			var c Content
			c.Set(HeaderAdvice, "")
			return c
		}, "advice: "},
		{"set twice replaces", func() Content {
			var c Content
			c.Set(HeaderError, "first").Set(HeaderError, "second")
			return c
		}, "error: second"},
		{"setbody twice replaces", func() Content {
			var c Content
			c.SetBody("first").SetBody("second")
			return c
		}, "second"},
		{"escaped value", func() Content {
			var c Content
			c.Set(HeaderError, "x\nerror: y").SetBody("b")
			return c
		}, "error: x\\nerror: y\n\nb"},
		{"body is not escaped", func() Content {
			var c Content
			c.Set(HeaderInternal, "true").SetBody("a\\b\tc\r\n\x00")
			return c
		}, "internal: true\n\na\\b\tc\r\n\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c().String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestContentAllHeadersInOrder(t *testing.T) {
	want := "internal: 1\nwait_outcome: 2\nwait_reason: 3\nwait_mode: 4\n" +
		"original_tool_call_id: 5\nerror: 6\ntool_call_id: 7\nduration_seconds: 8\n" +
		"input_available: 9\ntimed_out: 10\nadvice: 11\npending_prompts: 12\n\nbody"
	names := []string{
		HeaderInternal, HeaderWaitOutcome, HeaderWaitReason, HeaderWaitMode,
		HeaderOriginalToolCallID, HeaderError, HeaderToolCallID, HeaderDurationSeconds,
		HeaderInputAvailable, HeaderTimedOut, HeaderAdvice, HeaderPendingPrompts,
	}
	values := map[string]string{}
	for i, n := range names {
		values[n] = strconv.Itoa(i + 1)
	}
	// Forward, reverse and an interleaved order all render the same text.
	orders := [][]int{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
		{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
		{5, 0, 11, 3, 7, 1, 9, 2, 10, 4, 8, 6},
	}
	for _, order := range orders {
		var c Content
		c.SetBody("body")
		for _, i := range order {
			c.Set(names[i], values[names[i]])
		}
		if got := c.String(); got != want {
			t.Errorf("order %v: got\n%s\nwant\n%s", order, got, want)
		}
	}
}

func TestContentSetUnknownHeaderPanics(t *testing.T) {
	for _, name := range []string{"", "Error", "status", "error ", "x"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Set(%q) did not panic", name)
				}
			}()
			var c Content
			c.Set(name, "v")
		}()
	}
}

func TestContentIsCopiedByValue(t *testing.T) {
	var a Content
	a.Set(HeaderInternal, "true").SetBody("a")
	b := a
	b.Set(HeaderError, "e").SetBody("b")
	if got := a.String(); got != "internal: true\n\na" {
		t.Errorf("original changed: %q", got)
	}
	if a.IsError() || !b.IsError() {
		t.Errorf("IsError: a %v, b %v", a.IsError(), b.IsError())
	}
}

func TestContentAccessors(t *testing.T) {
	var c Content
	if _, ok := c.Header(HeaderError); ok {
		t.Error("zero Content has an error header")
	}
	if _, ok := c.Body(); ok {
		t.Error("zero Content has a body")
	}
	c.Set(HeaderError, "a\nb").SetBody("")
	if v, ok := c.Header(HeaderError); !ok || v != "a\nb" {
		t.Errorf("Header(error) = %q, %v", v, ok)
	}
	if _, ok := c.Header("nope"); ok {
		t.Error("Header(nope) is set")
	}
	if b, ok := c.Body(); !ok || b != "" {
		t.Errorf("Body() = %q, %v", b, ok)
	}
}

func TestIsError(t *testing.T) {
	var c Content
	if c.IsError() {
		t.Error("zero Content is an error")
	}
	c.Set(HeaderInternal, "true").SetBody("error: looks like one")
	if c.IsError() {
		t.Error("a body starting with error: makes an error")
	}
	if !ErrorResult("x").IsError() {
		t.Error("ErrorResult is not an error")
	}
	var e Content
	e.Set(HeaderError, "")
	if !e.IsError() {
		t.Error("an empty error header is not an error")
	}
}

// The fixed texts, compared with literal strings copied from docs/spec.md section 13.
func TestFixedTexts(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"placeholder", Placeholder("call_7").String(),
			"internal: true\n\nTool call `call_7` is running in the background."},
		{"completion prompt", CompletionPrompt("call_7"),
			"[internal] Tool call `call_7` completed. Its result is queued; use `wait` to consume it."},
		{"interrupted exact", Interrupted(WaitModeExact).String(),
			"internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: exact"},
		{"interrupted bare", Interrupted(WaitModeAnyBackground).String(),
			"internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: any_background"},
		{"error result", ErrorResult("Unknown tool call id").String(), "error: Unknown tool call id"},
		{"error result escaped", ErrorResult("a\nb").String(), `error: a\nb`},
		{"already consumed", MsgResultAlreadyConsumed, "Tool call result already consumed"},
		{"already waited for", MsgResultAlreadyWaitedFor, "Tool call result is already being waited for"},
		{"unknown id", MsgUnknownToolCallID, "Unknown tool call id"},
		{"no background", MsgNoBackgroundToolCall, "No background tool call to wait for"},
		{"bare wait pending", MsgBareWaitAlreadyPending, "A wait for the next background completion is already pending"},
		{"timeout minutes", MsgTimeoutMinutesInvalid, "timeout_minutes must be a positive integer"},
		{"canceled", MsgToolCallCanceled, "Tool call canceled"},
		{"cancellation requested", BodyCancellationRequested, "Tool cancellation requested"},
		{"id empty", MsgToolCallIDEmpty, "`tool_call_id` must not be empty"},
		{"already done", MsgToolCallAlreadyDone, "Tool call is already done"},
		{"already canceled", MsgToolCallAlreadyCanceled, "Tool call already canceled"},
		{"cannot be canceled", MsgToolCallCannotBeCanceled, "Tool call cannot be canceled"},
		{"advice", AdviceTimedWaits, "Consider status(waiting) and event-driven wakeups instead of repeated timed waits."},
		{"reminder", StatusReminderPrompt, "Reminder: when working on a task use `status` tool to acknowledge it."},
		{"message prompt", MessagePrompt("conv_2", "hello\nthere"), "Message from conv_2:\nhello\nthere"},
		{"watch status prompt", WatchStatusPrompt("conv_3", "blocked", "need a key"),
			"Watched agent conv_3 status: blocked on need a key"},
		{"watch final prompt", WatchFinalPrompt("conv_3", "all done"), "Watched agent conv_3 final response:\nall done"},
		{"interaction prompt", InteractionPrompt("call_9", "ia_1", "Proceed?", []string{"yes", "no"}),
			"Tool call `call_9` asks (ia_1): Proceed?\nOptions: yes, no"},
		{"interaction prompt one option", InteractionPrompt("call_9", "ia_1", "Ok?", []string{"ok"}),
			"Tool call `call_9` asks (ia_1): Ok?\nOptions: ok"},
		{"interaction prompt no options", InteractionPrompt("call_9", "ia_1", "Which file?", nil),
			"Tool call `call_9` asks (ia_1): Which file?"},
		{"interaction prompt empty options", InteractionPrompt("call_9", "ia_1", "Which file?", []string{}),
			"Tool call `call_9` asks (ia_1): Which file?"},
		{"wait modes", WaitModeExact + " " + WaitModeAnyBackground, "exact any_background"},
		{"header names", strings.Join(headerOrder[:], ", "),
			"internal, wait_outcome, wait_reason, wait_mode, original_tool_call_id, error, " +
				"tool_call_id, duration_seconds, input_available, timed_out, advice, pending_prompts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestFixedResultsShape(t *testing.T) {
	p := Placeholder("c")
	if p.IsError() {
		t.Error("placeholder is an error")
	}
	i := Interrupted(WaitModeExact)
	if _, ok := i.Body(); ok || i.IsError() {
		t.Error("interrupted has a body or is an error")
	}
	defer func() {
		if recover() == nil {
			t.Error("Interrupted with an unknown mode did not panic")
		}
	}()
	Interrupted("exactly")
}

func TestOutputBody(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"string", `"hello"`, "hello"},
		{"string with quotes and newlines", `"she said \"hi\"\nthen left\r\n\tok"`, "she said \"hi\"\nthen left\r\n\tok"},
		{"string with unicode escapes", `"\u00e9\u2028\ud83d\ude00"`, "é\u2028😀"},
		{"string that looks like JSON", `"{\"a\": 1}"`, `{"a": 1}`},
		{"string that looks like a number", `"2.5"`, "2.5"},
		{"empty string", `""`, ""},
		{"string with white space around", " \n\"x\" \t", "x"},
		{"object with spaces", "{ \"a\" : 1 ,\n \"b\" : [ 1, 2 ] }", `{"a":1,"b":[1,2]}`},
		{"object keeps string spaces and escapes", `{"k": "a b\n<c>\u2028"}`, `{"k":"a b\n<c>\u2028"}`},
		{"array", "[1, \"two\", null ]", `[1,"two",null]`},
		{"empty array", "[ ]", "[]"},
		{"number", "2.5", "2.5"},
		{"number exponent", "1e3", "1e3"},
		{"number negative", " -0.10 ", "-0.10"},
		{"big number", "123456789012345678901234567890", "123456789012345678901234567890"},
		{"true", "true", "true"},
		{"false", "false", "false"},
		{"null", "null", "null"},
		{"empty", "", ""},
		{"white space only", " \n", ""},
		{"invalid JSON kept", " {nope ", "{nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OutputBody(json.RawMessage(tt.in)); got != tt.want {
				t.Errorf("OutputBody(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if got := OutputBody(nil); got != "" {
		t.Errorf("OutputBody(nil) = %q", got)
	}
}

func TestDurationSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
		ok   bool
	}{
		{0, "", false},
		{-time.Second, "", false},
		{time.Second, "", false},
		{5 * time.Second, "", false},
		{5*time.Second + time.Nanosecond, "5", true},
		{5*time.Second + 999*time.Millisecond, "5", true},
		{6 * time.Second, "6", true},
		{6*time.Second + 999*time.Millisecond, "6", true},
		{90 * time.Minute, "5400", true},
	}
	for _, tt := range tests {
		got, ok := DurationSeconds(tt.d)
		if got != tt.want || ok != tt.ok {
			t.Errorf("DurationSeconds(%v) = %q, %v; want %q, %v", tt.d, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPendingPrompts(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    string // the value PendingPrompts returns
		wantHdr string // the rendered header line
	}{
		{"nil", nil, `[]`, `pending_prompts: []`},
		{"empty", []string{}, `[]`, `pending_prompts: []`},
		{"one", []string{"[internal] Tool call `c1` completed. Its result is queued; use `wait` to consume it."},
			"[\"[internal] Tool call `c1` completed. Its result is queued; use `wait` to consume it.\"]",
			"pending_prompts: [\"[internal] Tool call `c1` completed. Its result is queued; use `wait` to consume it.\"]"},
		{"two with a newline", []string{"Message from c2:\nhi", "b"},
			`["Message from c2:\nhi","b"]`,
			`pending_prompts: ["Message from c2:\\nhi","b"]`},
		{"quotes, backslash, html", []string{`a "q" \ <b>&`},
			`["a \"q\" \\ <b>&"]`,
			`pending_prompts: ["a \\"q\\" \\\\ <b>&"]`},
		{"line separators and C1", []string{"a\u2028b\u0085c"},
			`["a\u2028b` + "\u0085" + `c"]`,
			`pending_prompts: ["a\\u2028b\u0085c"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PendingPrompts(tt.in)
			if got != tt.want {
				t.Errorf("PendingPrompts = %q, want %q", got, tt.want)
			}
			var c Content
			c.Set(HeaderPendingPrompts, got)
			if hdr := c.String(); hdr != tt.wantHdr {
				t.Errorf("header = %q, want %q", hdr, tt.wantHdr)
			}
			// A client unescapes the header value, then parses the JSON.
			v, err := unescapeHeaderValue(strings.TrimPrefix(c.String(), "pending_prompts: "))
			if err != nil {
				t.Fatal(err)
			}
			var back []string
			if err := json.Unmarshal([]byte(v), &back); err != nil {
				t.Fatal(err)
			}
			if len(back) != len(tt.in) {
				t.Fatalf("round trip: %q", back)
			}
			for i := range back {
				if back[i] != tt.in[i] {
					t.Errorf("round trip [%d] = %q, want %q", i, back[i], tt.in[i])
				}
			}
		})
	}
}

func TestPendingPromptsOnInterruptedWait(t *testing.T) {
	c := Interrupted(WaitModeAnyBackground)
	c.Set(HeaderPendingPrompts, PendingPrompts([]string{"Message from c2:\nhi"}))
	want := "internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\n" +
		"wait_mode: any_background\npending_prompts: [\"Message from c2:\\\\nhi\"]"
	if got := c.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
