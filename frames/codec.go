package frames

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unicode/utf8"
)

// Decode parses one frame of either direction and returns a pointer to its struct (for
// example *ToolCall). It applies the rules of SPEC 2, in this order:
//
//   - b must be one JSON object, all of it valid UTF-8 (raw bytes: an escape such as \ud800
//     is JSON and is accepted), nested at most MaxNesting levels when it is not a frame the
//     broker sends (see MaxNesting for how levels are counted);
//   - "type" must be present and a string naming a known frame type (else unknown_frame);
//   - an "id" of a client frame must be a string of at most MaxIDLen bytes;
//   - every field must have its JSON type, and every required field (struct tag
//     `required:"true"`, nested structs included) must be present and not null;
//   - the frame's Validate method, if it has one, must accept it.
//
// Members are matched to fields by their exact name; unknown members are ignored. On failure
// the error is a *Error with code bad_frame (or unknown_frame) whose message names the
// offending field by its path (for example tools[2].name), and whose Ref is the frame's id
// when the frame has a readable one.
func Decode(b []byte) (Frame, error) { return decode(b, "") }

// DecodeClient is Decode for what a client sends the broker: a frame type only the broker sends
// (tool_call, welcome, …) is answered unknown_frame, saying so, before any of its fields is
// looked at — it is not a malformed broker frame but no frame a client may send (SPEC 2).
func DecodeClient(b []byte) (Frame, error) { return decode(b, ClientToBroker) }

// decode is Decode; when only is set, a frame type of the other direction is unknown_frame.
func decode(b []byte, only Direction) (Frame, error) {
	// One validating pass over the whole frame (check.go: JSON, UTF-8, nesting); after it the
	// scanner of scan.go only finds member boundaries.
	start := skipSpace(b, 0)
	if start == len(b) || b[start] != '{' {
		err := badFrame("frame is not a valid JSON object")
		err.Ref = PeekID(b)
		return nil, err
	}
	obj := b[start:]
	if err := checkFrame(obj); err != nil {
		err.Ref = PeekID(obj)
		return nil, err
	}
	f, err := decodeFrame(obj, typeOf(obj), only)
	if err != nil {
		err.Ref = PeekID(obj) // the ref of the error, read only when there is an error
		return nil, err
	}
	return f, nil
}

// decodeFrame decodes the frame object obj whose type member is typ (nil when absent); a type
// of another direction than only (when set) is unknown_frame.
func decodeFrame(obj, typ []byte, only Direction) (Frame, *Error) {
	if typ == nil || isNull(typ) {
		return nil, badFrame("missing required field type")
	}
	if len(typ) < 2 || typ[0] != '"' {
		return nil, badFrame("field type must be a string")
	}
	r := byType[string(nameOf(typ))] // no copy of the type string for the lookup
	if r == nil {
		name, _ := decodeString(typ)
		return nil, &Error{Code: CodeUnknownFrame, Message: fmt.Sprintf("unknown frame type %q", truncate(name, 64))}
	}
	if only != "" && r.dir != only {
		return nil, &Error{Code: CodeUnknownFrame, Message: fmt.Sprintf("%s is a frame the broker sends, not one it receives", r.typ)}
	}
	v := reflect.New(r.goType)
	sc := getScratch()
	err := decodeObject(r.info.values(obj, sc[:0]), r.info, v.Elem(), "", "")
	putScratch(sc)
	if err != nil {
		return nil, err
	}
	f := v.Interface().(Frame)
	if val, ok := f.(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, asBadFrame(err)
		}
	}
	return f, nil
}

// asBadFrame returns err as a fresh *Error: a copy of the *Error it wraps, or a bad_frame error
// carrying its text.
func asBadFrame(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		return &c
	}
	return badFrame("%v", err)
}

// bufPool recycles encoding buffers.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer is the capacity above which a buffer is not recycled.
const maxPooledBuffer = 64 << 10

// Encode renders f, a frame value or a non-nil pointer to one, as one compact JSON object whose
// first member is "type": f.FrameType(). Other members follow the struct's json tags; required
// arrays that are nil are written as [] and HTML characters are not escaped.
//
// Encode refuses, with an error wrapping a bad_frame *Error, a frame that Decode would reject:
// a missing required any-JSON field (nil or null), a non-object where an object is required, an
// id over MaxIDLen bytes, a negative Duration, a frame its Validate method rejects, or a client
// frame nested deeper than MaxNesting levels (through a json.RawMessage member). Bytes of a
// json.RawMessage member that are not UTF-8 are replaced by \ufffd, as encoding/json replaces
// them in strings. So every frame Encode returns is valid UTF-8 and decodes.
func Encode(f Frame) ([]byte, error) {
	if f == nil {
		return nil, errors.New("frames: cannot encode a nil frame")
	}
	v := reflect.ValueOf(f)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, fmt.Errorf("frames: cannot encode a nil %s", v.Type())
		}
		v = v.Elem()
	}
	typ := f.FrameType()
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("frames: cannot encode %s: %s is not a struct", typ, v.Type())
	}
	var prefix []byte
	var info *structInfo
	if r := byType[typ]; r != nil && r.goType == v.Type() {
		prefix, info = r.prefix, r.info
	} else {
		name, err := json.Marshal(typ)
		if err != nil {
			return nil, fmt.Errorf("frames: cannot encode %s: %w", typ, err)
		}
		prefix, info = append([]byte(`{"type":`), name...), infoFor(v.Type())
	}
	if err := checkEncode(v, info, ""); err != nil {
		return nil, fmt.Errorf("frames: cannot encode %s: %w", typ, err)
	}
	if val, ok := f.(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, fmt.Errorf("frames: cannot encode %s: %w", typ, err)
		}
	}
	v = withEmptySlices(v, info)

	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBuffer {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	buf.Write(prefix)
	p := buf.Len()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.Interface()); err != nil {
		return nil, fmt.Errorf("frames: cannot encode %s: %w", typ, err)
	}
	b := buf.Bytes()
	b = b[:len(b)-1] // Encoder's newline
	if len(b) < p+2 || b[p] != '{' {
		return nil, fmt.Errorf("frames: cannot encode %s: the struct did not encode as an object", typ)
	}
	var out []byte
	if len(b) == p+2 { // {}
		out = make([]byte, p+1)
		copy(out, b[:p])
		out[p] = '}'
	} else {
		out = make([]byte, len(b))
		copy(out, b)
		out[p] = ','
	}
	if !utf8.Valid(out) {
		// Only a json.RawMessage member can hold such bytes, inside its strings (encoding/json
		// checks the JSON of raw values but not their UTF-8): they are replaced as encoding/json
		// replaces them in Go strings, so that no frame Encode returns holds an invalid byte.
		out = toValidUTF8(out)
	}
	if r := byType[typ]; r != nil && r.dir == ClientToBroker {
		// A raw member may nest deeper than a client frame may (SPEC 2).
		if fl, key := checkJSON(out, MaxNesting); fl != flawNone {
			return nil, fmt.Errorf("frames: cannot encode %s: %w", typ, flawError(fl, key, MaxNesting))
		}
	}
	return out, nil
}

// toValidUTF8 returns the JSON text b with every byte that is not part of a UTF-8 sequence
// replaced by the escape \ufffd, as encoding/json writes invalid bytes of a Go string. b must be
// valid JSON, whose bytes outside ASCII are all inside strings.
func toValidUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, `\ufffd`...)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
