package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The timeline cap (SPEC 18 --timeline-max-bytes). Every store applies the same rule, inside
// the atomic step that appends the entries, so it is exact however many nodes write:
//
//   - The store keeps, next to a session's timeline, the sum of the encoded sizes (the JSON of
//     Entry, as Apply encodes it) of every entry offered to it whole, whether it was stored whole
//     or cut. The notice below is not counted.
//   - An entry is stored whole while that sum, the entry included, is at most the cap. The entry
//     that takes the sum past the cap, and every entry after it, is stored cut (CutEntry); the
//     one that takes it past is preceded by the notice (TimelineNotice, with that entry's
//     at_ms), so a timeline holds at most one. A timeline that expired starts again from 0.
//   - Cutting keeps at_ms, kind, call_id, handle and the detail's keys; it changes only detail
//     values longer than CutBytes (see CutEntry). An entry with nothing to cut is stored as it
//     is, without "truncated".
const (
	// DefaultTimelineMaxBytes is the cap of a session's timeline (4 MiB).
	DefaultTimelineMaxBytes = 4 << 20
	// CutBytes is the most a detail value keeps past the cap: a string's UTF-8 bytes, or the
	// compact JSON of any other value.
	CutBytes = 256
)

// minCuttable is the shortest encoded entry that can hold a detail value longer than CutBytes.
var minCuttable = len(`{"at_ms":0,"kind":"","detail":{"":}}`) + CutBytes + 1

// cutForm is an encoded Entry with its detail values kept encoded.
type cutForm struct {
	AtMS   int64                      `json:"at_ms"`
	Kind   string                     `json:"kind"`
	CallID string                     `json:"call_id,omitempty"`
	Handle string                     `json:"handle,omitempty"`
	Detail map[string]json.RawMessage `json:"detail"`
}

// CutEntry returns the cut form of an encoded timeline entry, stored in place of the entry once
// its session's timeline is past its cap, and whether anything was cut (false: the entry is
// stored as it is). Each top-level detail value whose compact JSON is longer than CutBytes is
// replaced:
//
//   - a string by its first CutBytes bytes at most, cut at a UTF-8 character boundary (a string
//     of at most CutBytes bytes is kept, however long its escaped JSON);
//   - any other value (object, array, number) by a string: its compact JSON, cut the same way.
//
// Values that stay are at most CutBytes of JSON, so no string anywhere in a cut entry's detail
// is longer than CutBytes. A cut entry's detail gets "truncated": true.
func CutEntry(whole []byte) ([]byte, bool, error) {
	if len(whole) < minCuttable {
		return nil, false, nil
	}
	var e cutForm
	if err := json.Unmarshal(whole, &e); err != nil {
		return nil, false, fmt.Errorf("jobs: decode timeline entry: %w", err)
	}
	cut := false
	for k, v := range e.Detail {
		if len(v) <= CutBytes {
			continue
		}
		var s string
		if v[0] == '"' {
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, false, fmt.Errorf("jobs: decode timeline entry: %w", err)
			}
			if len(s) <= CutBytes {
				continue
			}
		} else {
			s = string(v)
		}
		b, err := json.Marshal(cutString(s))
		if err != nil {
			return nil, false, err
		}
		e.Detail[k] = b
		cut = true
	}
	if !cut {
		return nil, false, nil
	}
	e.Detail["truncated"] = json.RawMessage("true")
	out, err := json.Marshal(e)
	if err != nil {
		return nil, false, fmt.Errorf("jobs: encode timeline entry: %w", err)
	}
	return out, true, nil
}

// cutString returns the longest prefix of s of at most CutBytes bytes that ends at a UTF-8
// character boundary.
func cutString(s string) string {
	if len(s) <= CutBytes {
		return s
	}
	i := CutBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// TimelineNoticeText is the text of the notice a timeline gets when it passes its cap.
func TimelineNoticeText(maxBytes int64) string {
	return "timeline over " + strconv.FormatInt(maxBytes, 10) + " bytes: entry details are cut to " +
		strconv.Itoa(CutBytes) + " bytes"
}

// TimelineNotice returns the entry that says a timeline passed its cap of maxBytes: kind
// notice, no call, detail {"max_bytes": maxBytes, "text": TimelineNoticeText(maxBytes)}.
func TimelineNotice(atMS, maxBytes int64) Entry {
	return Entry{AtMS: atMS, Kind: KindNotice,
		Detail: map[string]any{"max_bytes": maxBytes, "text": TimelineNoticeText(maxBytes)}}
}

// AppendTimelineNotice appends the JSON of TimelineNotice(atMS, maxBytes) to dst, exactly as
// json.Marshal encodes it (a store that cannot know in advance whether a transition passes the
// cap sends it along with every transition, so it is built without reflection).
func AppendTimelineNotice(dst []byte, atMS, maxBytes int64) []byte {
	dst = append(dst, `{"at_ms":`...)
	dst = strconv.AppendInt(dst, atMS, 10)
	dst = append(dst, `,"kind":"notice","detail":{"max_bytes":`...)
	dst = strconv.AppendInt(dst, maxBytes, 10)
	dst = append(dst, `,"text":"`...)
	dst = append(dst, TimelineNoticeText(maxBytes)...)
	return append(dst, `"}}`...)
}
