package asyncapi

import "testing"

// This file tests the text helpers that turn doc comments into descriptions.

// TestWithWireName checks that only a whole leading identifier is replaced.
func TestWithWireName(t *testing.T) {
	for _, c := range []struct{ doc, goName, wire, want string }{
		{"ToolDeferred is the host's acknowledgement.", "ToolDeferred", "tool_deferred", "`tool_deferred` is the host's acknowledgement."},
		{"CancelTimeout: the timeout expired.", "CancelTimeout", "timeout", "`timeout`: the timeout expired."},
		{"Speak, when false, only adds context.", "Speak", "speak", "`speak`, when false, only adds context."},
		{"ToolDeferredAck answers every defer.", "ToolDeferred", "tool_deferred", "ToolDeferredAck answers every defer."},
		{"Error", "Error", "error", "`error`"},
		{"The frame.", "Error", "error", "The frame."},
	} {
		if got := withWireName(c.doc, c.goName, c.wire); got != c.want {
			t.Errorf("withWireName(%q, %q, %q) = %q, want %q", c.doc, c.goName, c.wire, got, c.want)
		}
	}
}

// TestFirstSentence checks the summary rule, which follows go/doc's synopsis.
func TestFirstSentence(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"One (SPEC 6). Two.", "One (SPEC 6)."},
		{"No period", "No period"},
		{"Ends with a period.", "Ends with a period."},
		{"Version 1.5 is here. Next.", "Version 1.5 is here."},
		{"Ask A. Smith first. Then go.", "Ask A. Smith first."},
	} {
		if got := firstSentence(c.in); got != c.want {
			t.Errorf("firstSentence(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNormalizeDoc checks that wrapped paragraphs become one line and code keeps its lines.
func TestNormalizeDoc(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"One line\nwrapped here.\n", "One line wrapped here."},
		{"First.\n\nSecond\nparagraph.\n", "First.\n\nSecond paragraph."},
		{"Code:\n\n\tx := 1\n\ty := 2\n", "Code:\n\n\tx := 1\n\ty := 2"},
	} {
		if got := normalizeDoc(c.in); got != c.want {
			t.Errorf("normalizeDoc(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
