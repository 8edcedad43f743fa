package asyncapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// This file holds helpers that read the built document as plain JSON.

// jsonObject is a decoded JSON object.
type jsonObject = map[string]any

// parsedDocument returns Document decoded as plain JSON.
func parsedDocument(t *testing.T) jsonObject {
	t.Helper()
	b, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	var doc jsonObject
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the document is not a JSON object: %v", err)
	}
	return doc
}

// object returns the member path (slash separated) of v as an object, or fails the test.
func object(t *testing.T, v any, path string) jsonObject {
	t.Helper()
	cur := v
	for _, k := range strings.Split(path, "/") {
		m, ok := cur.(jsonObject)
		if !ok {
			t.Fatalf("%s: %q is not inside an object", path, k)
		}
		cur = m[k]
	}
	m, ok := cur.(jsonObject)
	if !ok {
		t.Fatalf("%s is not an object: %v", path, cur)
	}
	return m
}

// oneOfRefs returns the $refs of the oneOf of the message of an operation.
func oneOfRefs(t *testing.T, op jsonObject, path string) []string {
	t.Helper()
	list, ok := object(t, op, "message")["oneOf"].([]any)
	if !ok {
		t.Fatalf("%s: the message is not a oneOf", path)
	}
	var refs []string
	for i, item := range list {
		ref, ok := item.(jsonObject)["$ref"].(string)
		if !ok {
			t.Fatalf("%s: oneOf item %d is not a $ref: %v", path, i, item)
		}
		refs = append(refs, ref)
	}
	return refs
}
