package sim

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// WordingPrefix starts the instructions line whose Go-quoted sentence a response says (the
// adapter's convention: openai.WordingPrefix).
const WordingPrefix = "Say something like: "

// Metadata of the adapter's requests that the simulator reads (openai.MetaKind and the
// kinds of caller-turn responses).
const (
	metaKind    = "backchannel_kind"
	kindTurn    = "turn"
	kindClarify = "clarify"
)

// plan is what a response will do.
type plan struct {
	text   string
	call   *call
	silent bool
	fail   string // the response fails with this error code
}

type call struct{ name, args string }

// The grammar of the scripted model (SPEC 19) for caller turns.
var (
	callRule   = regexp.MustCompile(`(?s)^call\s+([A-Za-z0-9_-]+)\s*(.*)$`)
	cancelRule = regexp.MustCompile(`^cancel\s+(\S+)\s*$`)
	sayRule    = regexp.MustCompile(`(?s)^say\s+(.+)$`)
	muteRule   = regexp.MustCompile(`^mute\s+(\d+)\s*$`)
)

// planLocked decides what a response does (see the package documentation). s.mu is held.
func (s *Session) planLocked(p responseParams) plan {
	instructions := ""
	if p.Instructions != nil {
		instructions = *p.Instructions
	}
	last := s.lastTurnLocked()
	var text string
	switch kind := p.Metadata[metaKind]; {
	case (kind == "" || kind == kindTurn || kind == kindClarify) && last != nil && last.Type == "message" && last.Role == "user":
		t := strings.TrimSpace(last.Text)
		if g := callRule.FindStringSubmatch(t); g != nil {
			args := strings.TrimSpace(g[2])
			if args == "" {
				args = "{}"
			}
			var compact bytes.Buffer
			if json.Compact(&compact, []byte(args)) == nil {
				return plan{call: &call{name: g[1], args: compact.String()}}
			}
		}
		if g := cancelRule.FindStringSubmatch(t); g != nil {
			args, _ := json.Marshal(map[string]string{"ref": g[1]})
			return plan{call: &call{name: "cancel_job", args: string(args)}}
		}
		if g := muteRule.FindStringSubmatch(t); g != nil {
			s.muted, _ = strconv.Atoi(g[1])
			return plan{silent: true}
		}
		if g := sayRule.FindStringSubmatch(t); g != nil {
			text = strings.TrimSpace(g[1])
		}
	}
	if text == "" {
		text = s.sentenceLocked(instructions, last)
	}
	if s.muted > 0 {
		s.muted--
		return plan{silent: true, text: text}
	}
	return plan{text: text}
}

// sentenceLocked is what a response says when no rule of the grammar applies.
func (s *Session) sentenceLocked(instructions string, last *Item) string {
	if w, ok := wording(instructions); ok {
		return w
	}
	switch {
	case last == nil:
	case last.Type == "message" && last.Role == "user":
		return "I heard: " + strings.TrimSpace(last.Text)
	case last.Type == "function_call_output":
		name := "the tool"
		if c := s.callLocked(last.CallID); c != nil {
			name = c.Name
		}
		if msg, ok := errorOutput(last.Output); ok {
			return name + " failed: " + msg
		}
		return name + " returned: " + last.Output
	}
	return "OK."
}

// lastTurnLocked is the latest item that is not a system message.
func (s *Session) lastTurnLocked() *Item {
	for i := len(s.items) - 1; i >= 0; i-- {
		if it := s.items[i]; !(it.Type == "message" && it.Role == "system") {
			return it
		}
	}
	return nil
}

// wording finds the sentence of the instructions' `Say something like: "…"` line.
func wording(instructions string) (string, bool) {
	lines := strings.Split(instructions, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), WordingPrefix); ok {
			if w, err := strconv.Unquote(rest); err == nil {
				return w, true
			}
		}
	}
	return "", false
}

// errorOutput recognizes a function output {"error": MESSAGE}.
func errorOutput(output string) (string, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(output), &m) != nil || len(m) != 1 {
		return "", false
	}
	msg, ok := m["error"].(string)
	return msg, ok
}
