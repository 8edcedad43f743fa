package frames

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file holds the per-type metadata of frame structs — field names, kinds, the
// `required:"true"` tags — and the walks that use it: the decoder that fills a struct from a
// decoded JSON object, and the checks Encode runs before rendering. The struct tags are the one
// source of truth for required fields.
//
// Tags read here:
//   json:"name,omitempty"  the wire name (encoding/json rules; embedded structs are flattened)
//   required:"true"        the field must be present and not null
//   kind:"object"          a json.RawMessage field must hold a JSON object

// fieldKind is how the decoder treats a field.
type fieldKind uint8

const (
	kindString      fieldKind = iota // string or a named string type
	kindBool                         // bool
	kindInt                          // any signed integer
	kindRaw                          // json.RawMessage: any JSON value
	kindUnmarshaler                  // implements json.Unmarshaler (Duration)
	kindStruct                       // a nested object
	kindPtrStruct                    // an optional nested object
	kindSliceStruct                  // an array of objects
	kindSliceString                  // an array of strings
	kindPtrBool                      // an optional bool whose absence matters
	kindOther                        // anything else: decoded by encoding/json
)

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	durationType    = reflect.TypeFor[Duration]()
	requestType     = reflect.TypeFor[Request]()
)

// fieldInfo describes one wire field of a struct.
type fieldInfo struct {
	name     string       // wire name
	index    []int        // reflect index path, through embedded structs
	typ      reflect.Type // Go type of the field
	kind     fieldKind
	slot     int         // index of the first field of info with this wire name
	required bool        // required:"true"
	object   bool        // kind:"object"
	isID     bool        // the id of Request: at most MaxIDLen bytes
	elem     *structInfo // for kindStruct, kindPtrStruct, kindSliceStruct
}

// structInfo describes the wire fields of a struct type, in declaration order.
type structInfo struct {
	typ    reflect.Type
	fields []fieldInfo
	// byName indexes fields by wire name (the first field of a name, when two share one).
	byName map[string]int
	// labelNoun names an element of an array in messages, by the field at labelSlot, for
	// example (tool "NAME") for a ToolDecl; see labeler. labelSlot is -1 without a label.
	labelNoun string
	labelSlot int
	// requiredSlices indexes the required slice fields, which Encode writes as [] when nil.
	requiredSlices []int
	// encodeCheck is set when Encode has something to check in values of the type: a required
	// or object raw field, an id, a Duration, or such a field in a nested struct.
	encodeCheck bool
}

// labeler is implemented by nested types whose elements are named in messages by one of their
// fields.
type labeler interface {
	wireLabel() (field, noun string)
}

// infoCache maps reflect.Type to *structInfo.
var infoCache sync.Map

// infoFor returns the metadata of struct type t, computing it once.
func infoFor(t reflect.Type) *structInfo {
	if v, ok := infoCache.Load(t); ok {
		return v.(*structInfo)
	}
	building := map[reflect.Type]*structInfo{}
	buildInfo(t, building)
	for bt, bi := range building {
		infoCache.LoadOrStore(bt, bi)
	}
	v, _ := infoCache.Load(t)
	return v.(*structInfo)
}

// buildInfo computes the metadata of t and of the struct types it contains. building holds the
// types under construction, so that a type that contains itself does not recurse forever.
func buildInfo(t reflect.Type, building map[reflect.Type]*structInfo) *structInfo {
	if v, ok := infoCache.Load(t); ok {
		return v.(*structInfo)
	}
	if info := building[t]; info != nil {
		return info
	}
	info := &structInfo{typ: t, byName: map[string]int{}, labelSlot: -1}
	building[t] = info
	collectFields(t, nil, info, building)
	for i := range info.fields {
		f := &info.fields[i]
		if first, ok := info.byName[f.name]; ok {
			f.slot = first
		} else {
			info.byName[f.name], f.slot = i, i
		}
		if f.required && (f.kind == kindSliceStruct || f.kind == kindSliceString) {
			info.requiredSlices = append(info.requiredSlices, i)
		}
		if f.isID || f.typ == durationType || (f.kind == kindRaw && (f.required || f.object)) ||
			(f.elem != nil && f.elem.encodeCheck) {
			info.encodeCheck = true
		}
	}
	if l, ok := reflect.Zero(t).Interface().(labeler); ok {
		field, noun := l.wireLabel()
		if slot, ok := info.byName[field]; ok {
			info.labelSlot, info.labelNoun = slot, noun
		}
	}
	return info
}

// collectFields appends the wire fields of struct t (whose fields sit at index prefix in the
// outer struct) to info, flattening embedded structs as encoding/json does.
func collectFields(t reflect.Type, prefix []int, info *structInfo, building map[reflect.Type]*structInfo) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		idx := append(append([]int(nil), prefix...), i)
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			collectFields(sf.Type, idx, info, building)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := fieldInfo{
			name:     name,
			index:    idx,
			typ:      sf.Type,
			required: sf.Tag.Get("required") == "true",
			object:   sf.Tag.Get("kind") == "object",
			isID:     t == requestType && sf.Name == "ID",
		}
		f.kind = kindOf(sf.Type)
		switch f.kind {
		case kindStruct:
			f.elem = buildInfo(sf.Type, building)
		case kindPtrStruct, kindSliceStruct:
			f.elem = buildInfo(sf.Type.Elem(), building)
		}
		info.fields = append(info.fields, f)
	}
}

// kindOf classifies a field type.
func kindOf(t reflect.Type) fieldKind {
	switch {
	case t == rawMessageType:
		return kindRaw
	case reflect.PointerTo(t).Implements(unmarshalerType):
		return kindUnmarshaler
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kindInt
	case reflect.Struct:
		return kindStruct
	case reflect.Pointer:
		switch t.Elem().Kind() {
		case reflect.Struct:
			return kindPtrStruct
		case reflect.Bool:
			return kindPtrBool
		}
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.Struct:
			return kindSliceStruct
		case reflect.String:
			return kindSliceString
		}
	}
	return kindOther
}

// ---------------------------------------------------------------------------------------------
// decoding

// scratchLen is the number of member values (or array elements) a pooled scratch holds; every
// frame type and nested type has fewer fields. A longer array gets a slice of its own.
const scratchLen = 16

// scratch is the space in which decoding collects the member values of one object or the
// elements of one array. It is pooled rather than on the stack: frames are decoded on the
// goroutines of long-lived connections, and stack space a decode grows stays with its
// goroutine (10,000 idle hosts paid ~4 KiB each for on-stack arrays).
type scratch [scratchLen][]byte

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns an empty scratch; putScratch gives it back, cleared so that it keeps no
// frame's bytes alive.
func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	clear(sc[:])
	scratchPool.Put(sc)
}

// values collects the members of the JSON object raw (valid JSON, starting with '{') by field:
// vals[i] is the value of the member named as info.fields[i] (nil when absent; the last one when
// a member repeats, as encoding/json does). Other members are ignored. buf, when large enough,
// holds the result.
func (info *structInfo) values(raw []byte, buf [][]byte) [][]byte {
	n := len(info.fields)
	var vals [][]byte
	if cap(buf) >= n {
		vals = buf[:n]
		clear(vals)
	} else {
		vals = make([][]byte, n)
	}
	for s := members(raw); ; {
		key, val, ok := s.next()
		if !ok {
			return vals
		}
		if i, ok := info.byName[string(nameOf(key))]; ok {
			vals[i] = val
		}
	}
}

// decodeObject fills the struct v from the member values of one JSON object (see values). path
// is the object's path in the frame ("" for the frame itself) and lbl the label naming the
// enclosing element in messages. Members are taken by their exact wire name.
func decodeObject(vals [][]byte, info *structInfo, v reflect.Value, path, lbl string) *Error {
	for i := range info.fields {
		f := &info.fields[i]
		raw := vals[f.slot]
		if raw == nil || isNull(raw) {
			if f.required {
				return badFrame("missing required field %s%s", join(path, f.name), lbl)
			}
			continue
		}
		if err := decodeField(f, raw, v.FieldByIndex(f.index), path, lbl); err != nil {
			return err
		}
	}
	return nil
}

// decodeField decodes raw, a valid JSON value other than null, into the field f of value fv.
func decodeField(f *fieldInfo, raw []byte, fv reflect.Value, path, lbl string) *Error {
	switch f.kind {
	case kindString:
		s, ok := decodeString(raw)
		if !ok {
			return wrongType(path, f.name, "a string", lbl)
		}
		if f.isID && len(s) > MaxIDLen {
			return badFrame("field %s must be at most %d bytes", join(path, f.name), MaxIDLen)
		}
		fv.SetString(s)
	case kindBool:
		b, ok := decodeBool(raw)
		if !ok {
			return wrongType(path, f.name, "a boolean", lbl)
		}
		fv.SetBool(b)
	case kindPtrBool:
		b, ok := decodeBool(raw)
		if !ok {
			return wrongType(path, f.name, "a boolean", lbl)
		}
		p := reflect.New(f.typ.Elem())
		p.Elem().SetBool(b)
		fv.Set(p)
	case kindInt:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || fv.OverflowInt(n) {
			return wrongType(path, f.name, "an integer", lbl)
		}
		fv.SetInt(n)
	case kindRaw:
		if f.object && raw[0] != '{' {
			return wrongType(path, f.name, "an object", lbl)
		}
		fv.SetBytes(bytes.Clone(raw)) // the frame does not alias the caller's buffer
	case kindUnmarshaler:
		if err := fv.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			if errors.Is(err, errDuration) {
				return badFrame("field %s %v%s", join(path, f.name), err, lbl)
			}
			return badFrame("field %s is invalid: %v%s", join(path, f.name), err, lbl)
		}
	case kindStruct, kindPtrStruct:
		if raw[0] != '{' {
			return wrongType(path, f.name, "an object", lbl)
		}
		target := fv
		if f.kind == kindPtrStruct {
			target = reflect.New(f.typ.Elem()).Elem()
		}
		sc := getScratch()
		err := decodeObject(f.elem.values(raw, sc[:0]), f.elem, target, join(path, f.name), lbl)
		putScratch(sc)
		if err != nil {
			return err
		}
		if f.kind == kindPtrStruct {
			fv.Set(target.Addr())
		}
	case kindSliceStruct:
		if raw[0] != '[' {
			return wrongType(path, f.name, "an array", lbl)
		}
		esc, sc := getScratch(), getScratch()
		defer putScratch(esc)
		defer putScratch(sc)
		elems := elements(raw, esc[:0])
		sl := reflect.MakeSlice(f.typ, len(elems), len(elems))
		at := join(path, f.name)
		for i, e := range elems {
			if e[0] != '{' {
				return badFrame("field %s must be an object%s", index(at, i), lbl)
			}
			vals := f.elem.values(e, sc[:0])
			elbl := lbl
			if f.elem.labelSlot >= 0 {
				if name, ok := decodeString(vals[f.elem.labelSlot]); ok && name != "" {
					elbl = label(f.elem.labelNoun, name)
				}
			}
			if err := decodeObject(vals, f.elem, sl.Index(i), index(at, i), elbl); err != nil {
				return err
			}
		}
		fv.Set(sl)
	case kindSliceString:
		if raw[0] != '[' {
			return wrongType(path, f.name, "an array", lbl)
		}
		esc := getScratch()
		defer putScratch(esc)
		elems := elements(raw, esc[:0])
		sl := reflect.MakeSlice(f.typ, len(elems), len(elems))
		for i, e := range elems {
			s, ok := decodeString(e)
			if !ok {
				return badFrame("field %s must be a string%s", index(join(path, f.name), i), lbl)
			}
			sl.Index(i).SetString(s)
		}
		fv.Set(sl)
	default:
		p := reflect.New(f.typ)
		if err := json.Unmarshal(raw, p.Interface()); err != nil {
			return badFrame("field %s has an invalid value%s", join(path, f.name), lbl)
		}
		fv.Set(p.Elem())
	}
	return nil
}

// wrongType returns the bad_frame error of a field holding the wrong JSON type.
func wrongType(path, name, want, lbl string) *Error {
	return badFrame("field %s must be %s%s", join(path, name), want, lbl)
}

// isNull reports whether raw is the JSON literal null.
func isNull(raw []byte) bool { return len(raw) == 4 && string(raw) == "null" }

// decodeString decodes a JSON string value; ok is false for any other value. Strings without
// escapes and with valid UTF-8 are taken as they are; others go through encoding/json, which
// also replaces invalid UTF-8 with U+FFFD.
func decodeString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if simpleString(inner) {
		return string(inner), true
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// simpleString reports whether the body of a JSON string can be taken as it is: no escape, no
// quote, no control character, and valid UTF-8.
func simpleString(b []byte) bool {
	ascii := true
	for _, c := range b {
		switch {
		case c == '\\' || c == '"' || c < 0x20:
			return false
		case c >= 0x80:
			ascii = false
		}
	}
	return ascii || utf8.Valid(b)
}

// decodeBool decodes a JSON boolean; ok is false for any other value.
func decodeBool(raw []byte) (b, ok bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// ---------------------------------------------------------------------------------------------
// encoding

// checkEncode reports what in v (a struct of type info.typ) Decode would reject for reasons
// other than a Validate rule: a missing required any-JSON field, a non-object in an object
// field, an id over MaxIDLen bytes, a negative Duration.
func checkEncode(v reflect.Value, info *structInfo, path string) error {
	if !info.encodeCheck {
		return nil
	}
	for i := range info.fields {
		f := &info.fields[i]
		fv := v.FieldByIndex(f.index)
		switch {
		case f.kind == kindRaw:
			raw := fv.Bytes()
			if !present(raw) {
				if f.required {
					return badFrame("missing required field %s", join(path, f.name))
				}
				continue
			}
			if f.object && firstByte(raw) != '{' {
				return badFrame("field %s must be an object", join(path, f.name))
			}
		case f.isID:
			if fv.Len() > MaxIDLen {
				return badFrame("field %s must be at most %d bytes", join(path, f.name), MaxIDLen)
			}
		case f.typ == durationType:
			if fv.Int() < 0 {
				return badFrame("field %s must not be negative", join(path, f.name))
			}
		case f.elem == nil || !f.elem.encodeCheck:
		case f.kind == kindStruct:
			if err := checkEncode(fv, f.elem, join(path, f.name)); err != nil {
				return err
			}
		case f.kind == kindPtrStruct:
			if !fv.IsNil() {
				if err := checkEncode(fv.Elem(), f.elem, join(path, f.name)); err != nil {
					return err
				}
			}
		case f.kind == kindSliceStruct:
			for j := 0; j < fv.Len(); j++ {
				if err := checkEncode(fv.Index(j), f.elem, index(join(path, f.name), j)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// firstByte returns the first non-space byte of b, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// withEmptySlices returns v, or a copy of v whose nil required slices are empty, so that they
// encode as [] rather than null.
func withEmptySlices(v reflect.Value, info *structInfo) reflect.Value {
	copied := false
	for _, i := range info.requiredSlices {
		f := &info.fields[i]
		if !v.FieldByIndex(f.index).IsNil() {
			continue
		}
		if !copied {
			c := reflect.New(v.Type()).Elem()
			c.Set(v)
			v, copied = c, true
		}
		v.FieldByIndex(f.index).Set(reflect.MakeSlice(f.typ, 0, 0))
	}
	return v
}
