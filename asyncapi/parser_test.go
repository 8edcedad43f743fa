package asyncapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file validates the document with the official AsyncAPI parser, @asyncapi/parser from
// the npm registry, pinned in testdata/parser/package-lock.json and installed by the test.

// parserDir is the Node project that runs the parser.
const parserDir = "testdata/parser"

// installHint tells how to get node and npm.
const installHint = "the AsyncAPI document is validated with the official parser (@asyncapi/parser), " +
	"which needs Node.js 20 or later with npm: install them (Debian/Ubuntu: `apt-get install nodejs npm`, " +
	"or a release from https://nodejs.org/) and run the test again"

// parserReport is the JSON that validate.mjs prints.
type parserReport struct {
	Parsed      bool `json:"parsed"`
	Failed      bool `json:"failed"`
	Diagnostics []struct {
		Severity string `json:"severity"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		Path     string `json:"path"`
		Waived   string `json:"waived"`
	} `json:"diagnostics"`
}

// TestParserAcceptsDocument runs validate.mjs on the document and fails on any error or warning
// the parser reports.
func TestParserAcceptsDocument(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %s", installHint)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm not found: %s", installHint)
	}
	installParser(t, npm)
	// Reading the script also makes it part of go test's cache key.
	if _, err := os.ReadFile(filepath.Join(parserDir, "validate.mjs")); err != nil {
		t.Fatal(err)
	}

	doc, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "asyncapi.json")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "validate.mjs", file)
	cmd.Dir = parserDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var report parserReport
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("node validate.mjs: %v; no report (%v)\nstdout: %s\nstderr: %s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	var problems []string
	for _, d := range report.Diagnostics {
		line := d.Severity + " " + d.Code + " at " + d.Path + ": " + d.Message
		switch {
		case d.Waived != "":
			t.Logf("waived (%s): %s", d.Waived, line)
		case d.Severity == "error" || d.Severity == "warning":
			problems = append(problems, line)
		}
	}
	if !report.Parsed || report.Failed || runErr != nil || len(problems) > 0 {
		t.Fatalf("@asyncapi/parser rejects the document (parsed %v, exit %v):\n\t%s\nstderr: %s",
			report.Parsed, runErr, strings.Join(problems, "\n\t"), stderr.Bytes())
	}
}

// installParser runs `npm ci` in parserDir unless node_modules already holds the locked version
// of @asyncapi/parser.
func installParser(t *testing.T, npm string) {
	t.Helper()
	want, err := lockedParserVersion()
	if err != nil {
		t.Fatalf("%s/package-lock.json: %v", parserDir, err)
	}
	if have, err := installedParserVersion(); err == nil && have == want {
		return
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Logf("reinstalling the parser: %v", err)
	}
	t.Logf("installing @asyncapi/parser %s with npm ci in %s (once)", want, parserDir)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// --ignore-scripts: the parser needs no install script (one dependency's only script
	// reports usage statistics).
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = parserDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s\n(%s)", parserDir, err, out, installHint)
	}
	if have, err := installedParserVersion(); err != nil || have != want {
		t.Fatalf("after npm ci, node_modules has @asyncapi/parser %q (%v), want %s", have, err, want)
	}
}

// lockedParserVersion reads the version of @asyncapi/parser that package-lock.json pins.
func lockedParserVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(parserDir, "package-lock.json"))
	if err != nil {
		return "", err
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return "", err
	}
	v := lock.Packages["node_modules/@asyncapi/parser"].Version
	if v == "" {
		return "", errors.New("no version of @asyncapi/parser")
	}
	return v, nil
}

// installedParserVersion reads the version of @asyncapi/parser in node_modules. npm writes
// node_modules/.package-lock.json last: without it an install did not finish.
func installedParserVersion() (string, error) {
	if _, err := os.Stat(filepath.Join(parserDir, "node_modules", ".package-lock.json")); err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(parserDir, "node_modules", "@asyncapi", "parser", "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", err
	}
	return pkg.Version, nil
}
