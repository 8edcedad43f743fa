package model

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Wording is the sentence that voices a request: what the scripted model says (SPEC 19, and 12
// for permissions), and the wording other adapters suggest to their model (the OpenAI
// adapter's instructions quote it), so every model is asked for the same words. It is also
// the ask recorded for a permission decision when the model gave no transcript.
func Wording(r Request) string {
	switch r.Kind {
	case HandOff:
		return "Started " + r.Label + " in the background."
	case Milestone:
		return "Update on " + r.Label + ": " + JSONText(r.Segment)
	case InteractionAsk:
		if len(r.Options) == 0 {
			return r.Prompt
		}
		return r.Prompt + " Options: " + strings.Join(r.Options, ", ") + "."
	case Completion:
		switch r.State {
		case "failed":
			return r.Label + " failed: " + r.Error
		case "timed_out":
			return r.Label + " timed out."
		}
		return r.Label + " is done: " + JSONText(r.Output)
	case Inject:
		return r.Text
	case PermissionAsk:
		return "Shall I run " + r.Name + " with " + CompactJSON(r.Args) + "? Please say yes or no."
	case Clarification:
		return "I need a clear yes or no. Shall I run " + r.Name + " with " + CompactJSON(r.Args) + "?"
	case Decline:
		return "OK, I won't run " + r.Name + "."
	}
	return r.Text
}

// JSONText renders a JSON value the way SPEC 19 says: a string as it is, other JSON compact.
func JSONText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return CompactJSON(raw)
}

// CompactJSON renders JSON compact, {} when empty (SPEC 19's ARGS), and invalid JSON as it is.
func CompactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
