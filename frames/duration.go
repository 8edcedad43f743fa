package frames

import (
	"errors"
	"math"
	"strconv"
	"time"
)

// Duration is a duration flag of a tool declaration (SPEC 2 and 4). On the wire it is either a
// JSON integer of milliseconds (≥ 0) or a Go duration string such as "90s" or "2h" (also ≥ 0);
// it is always written as integer milliseconds. Durations are kept to whole milliseconds: a
// string with a finer part ("1.5ms") is truncated to the millisecond.
type Duration time.Duration

// errDuration is the one error every malformed duration gets.
var errDuration = errors.New(`must be a non-negative integer of milliseconds or a duration string such as "90s" or "2h"`)

// maxDurationMS is the largest number of milliseconds a time.Duration holds.
const maxDurationMS = math.MaxInt64 / int64(time.Millisecond)

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Milliseconds returns d in whole milliseconds.
func (d Duration) Milliseconds() int64 { return time.Duration(d).Milliseconds() }

// String formats d as time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as an integer number of milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Duration(d).Milliseconds(), 10), nil
}

// UnmarshalJSON accepts a JSON integer of milliseconds (≥ 0) or a JSON string that
// time.ParseDuration accepts and that is ≥ 0. JSON null leaves d unchanged.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return errDuration
	}
	switch c := b[0]; {
	case c == 'n' && string(b) == "null":
		return nil
	case c == '"':
		s, ok := decodeString(b)
		if !ok {
			return errDuration
		}
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return errDuration
		}
		*d = Duration(v.Truncate(time.Millisecond))
		return nil
	case c == '-' || ('0' <= c && c <= '9'):
		ms, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || ms < 0 || ms > maxDurationMS {
			return errDuration
		}
		*d = Duration(time.Duration(ms) * time.Millisecond)
		return nil
	}
	return errDuration
}

// JSONSchemaBytes describes the two wire forms of a Duration for JSON Schema generators (the
// RawExposer interface of github.com/swaggest/jsonschema-go).
func (Duration) JSONSchemaBytes() ([]byte, error) {
	return []byte(`{"oneOf":[{"type":"integer","minimum":0,"description":"milliseconds"},` +
		`{"type":"string","description":"Go duration string such as \"90s\" or \"2h\""}]}`), nil
}
