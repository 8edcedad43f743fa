package web

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The command that regenerates static/sdk.js.
const (
	updateEnv     = "UPDATE_WEB"
	updateCommand = "UPDATE_WEB=1 go test ./web/ (or npm --prefix sdk/js ci && npm --prefix sdk/js run bundle)"
)

// TestSDKUnit builds the SDK with tsc (type-checking it) and runs its unit tests with node's
// test runner: the frame types, tables and builders against frames/testdata/examples.json and
// docs/asyncapi.json, and the Client against a fake broker (requests, answers, seq dedup,
// reconnect with backoff and resume).
func TestSDKUnit(t *testing.T) {
	t.Parallel()
	ensureNodeModules(t, sdkDir)
	readTree(t, sdkDir, ".ts", ".mjs", ".json")
	readTree(t, "../frames/testdata", ".json")
	if _, err := os.ReadFile("../docs/asyncapi.json"); err != nil {
		t.Fatal(err)
	}
	runNode(t, sdkDir, 3*time.Minute, nil, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json")
	out := runNode(t, sdkDir, 3*time.Minute, nil, "--test", "--test-reporter=dot", "test/")
	t.Logf("node --test test/ (in %s):\n%s", sdkDir, out)
}

// TestBundleUpToDate rebuilds the SDK bundle the page loads and fails when the checked-in
// static/sdk.js differs from it; with UPDATE_WEB=1 it writes the new bundle instead.
func TestBundleUpToDate(t *testing.T) {
	t.Parallel()
	ensureNodeModules(t, sdkDir)
	readTree(t, filepath.Join(sdkDir, "src"), ".ts")
	readTree(t, filepath.Join(sdkDir, "scripts"), ".mjs")
	if _, err := os.ReadFile(filepath.Join(sdkDir, "package-lock.json")); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "sdk.js")
	runNode(t, sdkDir, 2*time.Minute, nil, "scripts/bundle.mjs", fresh)
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("static/sdk.js")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if bytes.Equal(have, want) {
		return
	}
	if os.Getenv(updateEnv) == "1" {
		if err := os.WriteFile("static/sdk.js", want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote web/static/sdk.js (%d bytes)", len(want))
		return
	}
	t.Fatalf("web/static/sdk.js is not the bundle of sdk/js/src (%d bytes checked in, %d built): regenerate it with `%s` and commit it",
		len(have), len(want), updateCommand)
}
