package frames

import "unicode/utf8"

// PeekID reads the id of a client frame that may not decode at all — one that is not valid
// JSON after its id (truncated, nested too deeply, broken), or that is over a size limit and was
// read only in part — so that its error can still carry ref (SPEC 2: an answer to a frame
// carries its id). It walks the frame's top-level members from the start without recursing and
// returns the value of the first "id" member when everything up to the end of that value is
// well formed and the value is a JSON string of at most MaxIDLen bytes; otherwise "".
//
// b may be a prefix of the frame: the id is read as soon as its value is complete.
func PeekID(b []byte) string {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ""
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		end := skipString(b, i)
		key := b[i:end]
		if len(key) < 2 || key[len(key)-1] != '"' {
			return "" // the key is cut off
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return ""
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return ""
		}
		end = skipValue(b, i)
		if string(nameOf(key)) == "id" {
			s, ok := decodeString(b[i:end])
			if !ok || len(s) > MaxIDLen || !utf8.Valid(b[i:end]) {
				return ""
			}
			return s
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return ""
		}
		i = skipSpace(b, i+1)
	}
	return ""
}
