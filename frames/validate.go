package frames

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// This file holds the helpers that the Validate methods and the decoder share to phrase
// bad_frame messages: field paths, exactly-one rules, enum rules.

// validateTarget checks the rule shared by every host frame about a job: exactly one of call_id
// and handle (an empty string counts as absent).
func validateTarget(callID, handle string) error {
	return exactlyOne("call_id", callID != "", "handle", handle != "")
}

// exactlyOne returns a bad_frame error unless exactly one of the two fields is present. It
// returns a plain nil error (never a typed nil) when the rule holds.
func exactlyOne(a string, hasA bool, b string, hasB bool) error {
	switch {
	case hasA && hasB:
		return badFrame("exactly one of %s and %s is allowed, got both", a, b)
	case !hasA && !hasB:
		return badFrame("exactly one of %s and %s is required, got neither", a, b)
	}
	return nil
}

// badEnum returns the bad_frame error of an enum field holding a value outside values.
func badEnum[T ~string](field string, values []T) *Error {
	return badFrame("field %s must be one of %s", field, enumList(values))
}

// present reports whether an any-JSON field holds a value: not absent and not JSON null.
func present(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// join returns the path of the member name of the object at path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// index returns the path of element i of the array at path.
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// toolLabel names a tool declaration in a message: ` (tool "NAME")`.
func toolLabel(name string) string { return label("tool", name) }

// label renders ` (NOUN "VALUE")`, the value truncated to 64 bytes.
func label(noun, value string) string {
	return fmt.Sprintf(" (%s %q)", noun, truncate(value, 64))
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
