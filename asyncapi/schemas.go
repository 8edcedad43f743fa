package asyncapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/swaggest/jsonschema-go"
)

// schemasPrefix is where payload schemas live in the document.
const schemasPrefix = "#/components/schemas/"

// framesPkgPath is the import path of package frames, whose type names become definition names.
var framesPkgPath = reflect.TypeFor[frames.Hello]().PkgPath()

// constants pins fields whose only valid value is a constant of package frames, keyed
// "Type.json_name".
var constants = map[string]any{
	"Hello.protocol": frames.Protocol,
}

// schemaSet is the JSON Schema of every frame type and of every type those frames use, keyed by
// definition name: the Go type name without a package prefix.
type schemaSet struct {
	defs map[string]*jsonschema.Schema
	// refs maps each frame type string to the reference of its payload schema.
	refs map[string]string
}

// reflectSchemas reflects the struct of every frame type of frames.Types with r and completes
// the schemas from src: descriptions from the doc comments, the "type" member as a constant,
// and the per-value meaning of every enum.
func reflectSchemas(r *jsonschema.Reflector, src sources) (*schemaSet, error) {
	set := &schemaSet{defs: map[string]*jsonschema.Schema{}, refs: map[string]string{}}
	names := map[string]reflect.Type{}
	var nameErr error
	for _, typ := range frames.Types() {
		f, _ := frames.New(typ)
		root, err := r.Reflect(f,
			jsonschema.RootRef,
			jsonschema.DefinitionsPrefix(schemasPrefix),
			jsonschema.InterceptDefName(func(t reflect.Type, name string) string {
				if t.PkgPath() != framesPkgPath {
					return name
				}
				if prev, ok := names[t.Name()]; ok && prev != t && nameErr == nil {
					nameErr = fmt.Errorf("asyncapi: two types are named %s", t.Name())
				}
				names[t.Name()] = t
				return t.Name()
			}),
			jsonschema.CollectDefinitions(func(name string, s jsonschema.Schema) {
				set.defs[name] = &s
			}),
		)
		if err != nil {
			return nil, fmt.Errorf("asyncapi: reflect %s: %w", typ, err)
		}
		if root.Ref == nil || !strings.HasPrefix(*root.Ref, schemasPrefix) {
			return nil, fmt.Errorf("asyncapi: frame %s was not reflected into a named schema", typ)
		}
		set.refs[typ] = *root.Ref
	}
	if nameErr != nil {
		return nil, nameErr
	}
	for _, name := range slices.Sorted(maps.Keys(set.defs)) {
		s := set.defs[name]
		if s.ReflectType == nil { // schemas a type exposes itself (Duration)
			s.ReflectType = names[name]
		}
		if err := complete(s, src); err != nil {
			return nil, fmt.Errorf("asyncapi: schema %s: %w", name, err)
		}
	}
	for typ, ref := range set.refs {
		s := set.defs[strings.TrimPrefix(ref, schemasPrefix)]
		if s == nil {
			return nil, fmt.Errorf("asyncapi: frame %s: no schema at %s", typ, ref)
		}
		addTypeMember(s, typ)
	}
	return set, nil
}

// complete adds to the schema of a type of package frames what reflection does not know: the
// type's description, its fields' descriptions and constraints, and the meaning of each enum
// value.
func complete(s *jsonschema.Schema, src sources) error {
	t := s.ReflectType
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.PkgPath() != framesPkgPath {
		return nil
	}
	doc, ok := src.Types[t.Name()]
	if !ok {
		return fmt.Errorf("frames.%s has no doc comment", t.Name())
	}
	if e, ok := reflect.Zero(t).Interface().(interface{ Enum() []any }); ok {
		items, err := enumItems(t, e.Enum(), src)
		if err != nil {
			return err
		}
		doc += "\n\n" + items
	}
	s.WithDescription(doc)
	if t.Kind() != reflect.Struct {
		return nil
	}
	unsequenced := false
	if f, ok := reflect.New(t).Interface().(frames.Frame); ok && !frames.Sequenced(f.FrameType()) {
		unsequenced = true
		delete(s.Properties, "seq") // it embeds Reply, but never carries seq (SPEC 2)
	}
	for _, f := range reflect.VisibleFields(t) {
		name, ok := wireName(f)
		if !ok || (unsequenced && name == "seq") {
			continue
		}
		prop, ok := s.Properties[name]
		if !ok || prop.TypeObject == nil {
			return fmt.Errorf("field %s is not a property", f.Name)
		}
		p := prop.TypeObject
		// Broker frames never carry null, and a client's null counts as absent (or as missing,
		// for a required field): the schemas admit no null.
		if p.Ref == nil {
			p.RemoveType(jsonschema.Null)
		}
		owner := declaringType(t, f)
		fdoc, ok := src.Fields[owner.Name()+"."+f.Name]
		if !ok {
			return fmt.Errorf("field %s.%s has no doc comment", owner.Name(), f.Name)
		}
		p.WithDescription(withWireName(fdoc, f.Name, name))
		if f.Tag.Get("kind") == "object" {
			p.WithType(jsonschema.Object.Type())
		} else if f.Type == reflect.TypeFor[json.RawMessage]() && f.Tag.Get("required") == "true" {
			// Any JSON value, but a required member may not be null.
			p.WithNot(jsonschema.Null.ToSchemaOrBool())
		}
		if v, ok := constants[t.Name()+"."+name]; ok {
			p.WithConst(v)
		}
	}
	return nil
}

// enumItems renders the values of an enum type as a Markdown list, each with the doc comment
// of its constant.
func enumItems(t reflect.Type, values []any, src sources) (string, error) {
	var b strings.Builder
	for i, v := range values {
		s := fmt.Sprint(v)
		doc, ok := src.Values[t.Name()+"."+s]
		if !ok {
			return "", fmt.Errorf("the constant of frames.%s value %q has no doc comment", t.Name(), s)
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- ")
		b.WriteString(doc)
	}
	return b.String(), nil
}

// addTypeMember adds the "type" member of a frame, required and constant, to its schema.
func addTypeMember(s *jsonschema.Schema, typ string) {
	p := jsonschema.String.ToSchemaOrBool()
	p.TypeObject.WithConst(typ).WithDescription(fmt.Sprintf("The frame type, always `%s`.", typ))
	if s.Properties == nil {
		s.Properties = map[string]jsonschema.SchemaOrBool{}
	}
	s.Properties["type"] = p
	s.Required = append([]string{"type"}, slices.DeleteFunc(s.Required, func(n string) bool { return n == "type" })...)
}

// wireName returns the JSON member name of a struct field, as encoding/json names it; ok is
// false for fields that are not members (embedded structs, unexported or "-" fields).
func wireName(f reflect.StructField) (name string, ok bool) {
	if f.Anonymous || !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ = strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

// declaringType returns the struct type that declares f, a field of t possibly promoted from an
// embedded struct.
func declaringType(t reflect.Type, f reflect.StructField) reflect.Type {
	for _, i := range f.Index[:len(f.Index)-1] {
		t = t.Field(i).Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return t
}
