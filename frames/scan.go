package frames

import "bytes"

// This file holds the scanner Decode uses to take a frame apart after one validating pass over
// it (check.go, which accepts a subset of what json.Valid accepts): it splits objects into
// members and arrays into elements by walking the bytes, so that the frame is validated once
// and nested objects are not unmarshalled again into maps of their own. Every function here
// expects valid JSON (the caller checked it) and only finds boundaries.

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first byte at or after i that is not white space.
func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string whose opening quote is data[i].
func skipString(data []byte, i int) int {
	for i++; ; {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return len(data)
		}
		i += j
		// The quote closes the string unless an odd number of backslashes escapes it.
		n := 0
		for k := i - 1; k >= 0 && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
		i++
	}
}

// skipValue returns the index just past the JSON value that starts at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number or a literal: it ends at a delimiter.
	for i < len(data) {
		switch c := data[i]; {
		case c == ',' || c == '}' || c == ']' || isSpace(c):
			return i
		}
		i++
	}
	return i
}

// memberScanner walks the members of one valid JSON object.
type memberScanner struct {
	data []byte
	i    int
}

// members returns a scanner of the object data, which must start with '{' (after white space).
func members(data []byte) memberScanner { return memberScanner{data: data, i: skipSpace(data, 0) + 1} }

// next returns the next member: its key as the raw JSON string (quotes included) and its value
// without the surrounding white space. ok is false after the last member.
func (s *memberScanner) next() (key, val []byte, ok bool) {
	i := skipSpace(s.data, s.i)
	if i < len(s.data) && s.data[i] == ',' {
		i = skipSpace(s.data, i+1)
	}
	if i >= len(s.data) || s.data[i] != '"' {
		return nil, nil, false
	}
	end := skipString(s.data, i)
	key = s.data[i:end]
	i = skipSpace(s.data, skipSpace(s.data, end)+1) // past the colon
	end = skipValue(s.data, i)
	s.i = end
	return key, s.data[i:end], true
}

// elements appends the elements of the valid JSON array data (which starts with '[') to out.
func elements(data []byte, out [][]byte) [][]byte {
	i := skipSpace(data, skipSpace(data, 0)+1)
	for i < len(data) && data[i] != ']' {
		end := skipValue(data, i)
		out = append(out, data[i:end])
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return out
}

// nameOf returns the member name a key (a raw JSON string, quotes included) stands for: the
// key's own bytes when it has no escape and is valid UTF-8 (no copy), else its decoded text;
// nil for anything that is not a JSON string (a missing member, a number).
func nameOf(key []byte) []byte {
	if len(key) < 2 || key[0] != '"' || key[len(key)-1] != '"' {
		return nil // not a string: a missing type member, or one of another JSON type
	}
	inner := key[1 : len(key)-1]
	if simpleString(inner) {
		return inner
	}
	s, _ := decodeString(key)
	return []byte(s)
}
