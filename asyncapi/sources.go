package asyncapi

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// sources is what package frames says in prose: the doc comments of its exported types,
// struct fields and string constants, and its example frames. The document is built from a
// sources value; sources_gen.go holds the one extracted from the frames source tree, and the
// tests extract it again to check that it has not drifted.
type sources struct {
	// Types maps the name of an exported type of package frames to its doc comment.
	Types map[string]string
	// Fields maps "Type.Field" (the struct that declares the field) to the field's doc comment.
	Fields map[string]string
	// Values maps "Type.value" — a string type of package frames and the value of one of its
	// constants — to the constant's doc comment, whose leading constant name is replaced by
	// the value in code style (see withWireName).
	Values map[string]string
	// Examples maps each frame type string to one example frame, compact JSON, from
	// frames/testdata/examples.json.
	Examples map[string]string
}

// withWireName replaces the Go identifier that starts a doc comment ("ToolDeferred is …",
// "CancelTimeout: …") by the name a protocol reader knows, in code style ("`tool_deferred` is
// …"). Text that does not start with the identifier as a whole word is returned unchanged.
func withWireName(doc, goName, wireName string) string {
	rest, ok := strings.CutPrefix(doc, goName)
	if !ok {
		return doc
	}
	if r, _ := utf8.DecodeRuneInString(rest); rest != "" && (r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return doc
	}
	return "`" + wireName + "`" + rest
}

// firstSentence returns the first sentence of text: up to the first period that is followed by
// white space and does not end a single capital letter (as go/doc's synopsis does).
func firstSentence(text string) string {
	var ppp, pp, p rune
	for i, q := range text {
		if q == '\n' || q == '\r' || q == '\t' {
			q = ' '
		}
		if q == ' ' && p == '.' && (!unicode.IsUpper(pp) || unicode.IsUpper(ppp)) {
			return text[:i]
		}
		ppp, pp, p = pp, p, q
	}
	return text
}
