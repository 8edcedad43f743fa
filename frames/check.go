package frames

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// This file holds the one validating pass Decode makes over a frame before taking it apart: the
// JSON grammar (what json.Valid accepts), UTF-8 (SPEC 2: no invalid byte is ever stored or passed
// on to another client) and the nesting limit, in a single walk over the bytes.

// MaxNesting is the deepest JSON nesting a client frame may have (SPEC 2: "a JSON nesting deeper
// than 64 levels" is bad_frame). Levels are counted by objects and arrays: the frame object
// itself is level 1, and an object or array that is a member or element of a value at level n
// is at level n+1; strings, numbers and literals add none. So in
//
//	{"type":"agent.tool_call", ..., "arguments":{"a":[{"b":1}]}}
//
// the frame is level 1, arguments level 2, the array level 3 and {"b":1} level 4: the
// arguments of a frame may nest MaxNesting-1 levels themselves.
//
// The limit is a rule of the frames clients send. Frames the broker sends are not held to it:
// they may carry a client's JSON a level or two below where the client put it (the arguments
// of every job of tool_deferred_resume are at level 4), and every frame the broker sends must
// decode.
const MaxNesting = 64

// flaw is what a validating pass found wrong with a JSON text.
type flaw uint8

const (
	flawNone   flaw = iota
	flawSyntax      // not exactly one JSON value
	flawUTF8        // a byte sequence that is not UTF-8, inside a string
	flawDepth       // nested deeper than the limit
)

// strSafe marks the bytes a JSON string may hold as they are without a look at what follows:
// ASCII other than the quote, the backslash and the control characters.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// checkJSON validates b as json.Valid does — exactly one JSON value with optional white space
// around it (RFC 8259) — and also requires that all of it be valid UTF-8 (as utf8.Valid: no
// overlong form, no surrogate code point, nothing above U+10FFFF) and that it nest at most
// maxDepth levels of objects and arrays (the outermost one is level 1; maxDepth is at most 64).
//
// An escape is JSON and is accepted whatever it stands for: `\ud800`, a lone surrogate, is six
// ASCII bytes that the broker stores and passes on as they are (encoding/json decodes it to
// U+FFFD; JSON.parse and Python's json to a lone UTF-16 unit, none of them refusing it), unlike
// the bytes ED A0 80 that would encode the same code point in UTF-8 and are refused. SPEC 2 is
// about bytes; the stricter I-JSON rule (RFC 7493), which refuses such escapes too, is not
// applied.
//
// It returns the first flaw found, scanning from the start, and key: the raw key (quotes
// included) of the top-level member in whose value the flaw is, or nil when it is elsewhere (in
// a top-level key, between members, outside the outermost value).
func checkJSON(b []byte, maxDepth int) (fl flaw, key []byte) {
	var objects uint64 // bit d-1 is set when the container at level d is an object
	depth := 0
	i := 0
	var member []byte // the top-level member being read, once its key is complete
	// readKey reads an object key at b[i] and the colon after it; it returns the index after
	// the colon, or a flaw.
	readKey := func(i int) (int, flaw) {
		if i >= len(b) || b[i] != '"' {
			return i, flawSyntax
		}
		end, fl := scanString(b, i)
		if fl != flawNone {
			return end, fl
		}
		if depth == 1 {
			member = b[i:end]
		}
		end = skipSpace(b, end)
		if end >= len(b) || b[end] != ':' {
			return end, flawSyntax
		}
		return end + 1, flawNone
	}
	fail := func(fl flaw) (flaw, []byte) {
		if depth == 0 {
			return fl, nil
		}
		return fl, member
	}
	for {
		// A value starts at b[i] (after white space).
		i = skipSpace(b, i)
		if i >= len(b) {
			return fail(flawSyntax)
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth >= maxDepth {
				return fail(flawDepth)
			}
			depth++
			i = skipSpace(b, i+1)
			if c == '{' {
				objects |= 1 << (depth - 1)
				if i < len(b) && b[i] == '}' {
					i++
					depth--
					break
				}
				if depth == 1 {
					member = nil
				}
				var fl flaw
				if i, fl = readKey(i); fl != flawNone {
					return fail(fl)
				}
				continue // the member's value
			}
			objects &^= 1 << (depth - 1)
			if i < len(b) && b[i] == ']' {
				i++
				depth--
				break
			}
			continue // the first element
		case '"':
			var fl flaw
			if i, fl = scanString(b, i); fl != flawNone {
				return fail(fl)
			}
		case 't':
			if !hasLiteral(b, i, "true") {
				return fail(flawSyntax)
			}
			i += 4
		case 'f':
			if !hasLiteral(b, i, "false") {
				return fail(flawSyntax)
			}
			i += 5
		case 'n':
			if !hasLiteral(b, i, "null") {
				return fail(flawSyntax)
			}
			i += 4
		default:
			var ok bool
			if i, ok = scanNumber(b, i); !ok {
				return fail(flawSyntax)
			}
		}
		// A value ended at b[i]: what follows closes containers, or separates the next value.
		for {
			i = skipSpace(b, i)
			if depth == 0 {
				if i != len(b) {
					return flawSyntax, nil
				}
				return flawNone, nil
			}
			if i >= len(b) {
				return fail(flawSyntax)
			}
			inObject := objects>>(depth-1)&1 == 1
			c := b[i]
			if c == ',' {
				i = skipSpace(b, i+1)
				if inObject {
					if depth == 1 {
						member = nil
					}
					var fl flaw
					if i, fl = readKey(i); fl != flawNone {
						return fail(fl)
					}
				}
				break // the next value
			}
			if (inObject && c == '}') || (!inObject && c == ']') {
				i++
				depth--
				if depth == 0 {
					member = nil
				}
				continue
			}
			return fail(flawSyntax)
		}
	}
}

// hasLiteral reports whether b holds lit at i.
func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanString checks the JSON string whose opening quote is b[i] and returns the index just past
// its closing quote, or the flaw found.
func scanString(b []byte, i int) (int, flaw) {
	i++
	for {
		for i < len(b) && strSafe[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, flawSyntax
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, flawNone
		case c == '\\':
			if i+1 >= len(b) {
				return i, flawSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, flawSyntax
				}
				i += 6
			default:
				return i, flawSyntax
			}
		case c < 0x20:
			return i, flawSyntax
		default: // c >= 0x80
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return i, flawUTF8
			}
			i += n
		}
	}
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// scanNumber checks the JSON number that starts at b[i] and returns the index just past it; ok
// is false when none starts there.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// skipDigits returns the index of the first byte at or after i that is not a decimal digit.
func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// checkFrame is the validating pass of Decode over the frame object obj (which starts with
// '{'): nil when obj is one valid JSON object, valid UTF-8 and nested at most MaxNesting levels
// — or deeper, when it is a frame the broker sends (see MaxNesting) — else the bad_frame error
// naming what is wrong.
func checkFrame(obj []byte) *Error {
	fl, key := checkJSON(obj, MaxNesting)
	if fl == flawDepth && json.Valid(obj) && utf8.Valid(obj) {
		// Rare: a frame the broker sends may nest deeper. It is checked as frames were before
		// the limit: JSON (with encoding/json's own nesting limit, 10,000 levels) and UTF-8.
		if r := byType[string(nameOf(typeOf(obj)))]; r != nil && r.dir == BrokerToClient {
			return nil
		}
	}
	return flawError(fl, key, MaxNesting)
}

// typeOf returns the raw value of the type member of the valid JSON object obj (nil when it has
// none; the last one when it repeats, as encoding/json takes it).
func typeOf(obj []byte) []byte {
	var typ []byte
	for s := members(obj); ; {
		key, val, ok := s.next()
		if !ok {
			return typ
		}
		if string(nameOf(key)) == "type" {
			typ = val
		}
	}
}

// flawError is the bad_frame error of a flaw found in a frame (nil for none); key is the raw key
// of the top-level member it is in, when known, and limit the nesting limit it was checked
// against.
func flawError(fl flaw, key []byte, limit int) *Error {
	in := ""
	if key != nil {
		in = " (in field " + fieldName(key) + ")"
	}
	switch fl {
	case flawNone:
		return nil
	case flawUTF8:
		return badFrame("frame is not valid UTF-8%s", in)
	case flawDepth:
		return badFrame("JSON nesting deeper than %d levels%s", limit, in)
	}
	return badFrame("frame is not a valid JSON object")
}

// fieldName renders a member name for a message: as it is when it is short printable ASCII
// without quotes or backslashes, quoted (and cut to 64 bytes) otherwise.
func fieldName(key []byte) string {
	name := string(nameOf(key))
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return strconv.Quote(truncate(name, 64))
		}
	}
	if len(name) == 0 || len(name) > 64 {
		return strconv.Quote(truncate(name, 64))
	}
	return name
}

// CheckMember applies to raw — a JSON value that a client frame would carry as its top-level
// member name — the rules Decode applies to a whole frame: raw must be one valid JSON value, be
// valid UTF-8, and nest at most MaxNesting-1 levels itself (a member is at level 2 of its frame:
// see MaxNesting). It is for JSON that reaches the broker in something other than a frame and
// is passed on to clients in one, such as the arguments of an MCP tools/call, which become the
// arguments of the host's tool_call. The error is a bad_frame *Error naming the field, or nil.
func CheckMember(name string, raw []byte) *Error {
	switch fl, _ := checkJSON(raw, MaxNesting-1); fl {
	case flawSyntax:
		return badFrame("field %s is not valid JSON", name)
	case flawUTF8:
		return badFrame("field %s is not valid UTF-8", name)
	case flawDepth:
		return badFrame("field %s nests JSON deeper than %d levels", name, MaxNesting-1)
	}
	return nil
}
