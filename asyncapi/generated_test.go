package asyncapi

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// This file holds the tests that keep the generated files — sources_gen.go and
// docs/asyncapi.json — equal to what package frames says, and rewrites them on request.

// documentPath is the checked-in copy of the document.
const documentPath = "../docs/asyncapi.json"

// sourcesPath is the generated copy of the texts of package frames.
const sourcesPath = "sources_gen.go"

// TestSourcesGenIsUpToDate fails when the doc comments or examples of package frames changed
// and sources_gen.go was not regenerated.
func TestSourcesGenIsUpToDate(t *testing.T) {
	want, err := renderSources(mustTreeSources(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, sourcesPath, want, "the doc comments or examples of package frames changed")
}

// TestDocumentIsUpToDate fails when docs/asyncapi.json differs from the document built from
// package frames as it is now, or when Document (built from sources_gen.go) does.
func TestDocumentIsUpToDate(t *testing.T) {
	want, err := build(mustTreeSources(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, documentPath, want, "package frames or package asyncapi changed")
	if updating() {
		return
	}
	got, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Document() differs from the document built from package frames: %s is out of date. "+
			"Regenerate it with:\n\n\t%s%s", repoPath(sourcesPath), updateCommand, firstDifference(got, want))
	}
}

// TestDocumentIsDeterministic builds the document twice and checks that Document returns
// copies.
func TestDocumentIsDeterministic(t *testing.T) {
	a, err := build(frameSources)
	if err != nil {
		t.Fatal(err)
	}
	b, err := build(frameSources)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("two builds differ:%s", firstDifference(a, b))
	}
	d1, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	d1[0] = 'x'
	d2, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d2, a) {
		t.Fatal("Document() returned bytes that a caller's change altered, or that differ from build")
	}
}

// The command that regenerates sources_gen.go and docs/asyncapi.json.
const (
	updateEnv     = "UPDATE_ASYNCAPI"
	updateCommand = "UPDATE_ASYNCAPI=1 go test ./asyncapi/"
)

// updating reports whether the tests rewrite the generated files.
func updating() bool { return os.Getenv(updateEnv) != "" }

// checkGenerated compares the file at path with want, or rewrites it when updating.
func checkGenerated(t *testing.T, path string, want []byte, what string) {
	t.Helper()
	if updating() {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatalf("rewrite %s: %v", path, err)
		}
		t.Logf("rewrote %s", path)
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (generate it with: %s)", repoPath(path), err, updateCommand)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: %s. Regenerate it with:\n\n\t%s\n\nthen review and commit the diff.%s",
			repoPath(path), what, updateCommand, firstDifference(got, want))
	}
}

// repoPath names a path relative to this package as seen from the repository root.
func repoPath(path string) string {
	if p, ok := strings.CutPrefix(path, "../"); ok {
		return p
	}
	return "asyncapi/" + path
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("\nFirst difference at line %d:\n\thave: %.200s\n\twant: %.200s", i+1, gl, wl)
		}
	}
	return ""
}
