package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file runs Node.js for the tests: npm ci of the test's Node projects (sdk/js and
// testdata/browser, both pinned by their package-lock.json), and node itself.

const (
	// sdkDir is the browser SDK's npm package.
	sdkDir = "../sdk/js"
	// browserDir is the Node project that drives Chromium (playwright-core).
	browserDir = "testdata/browser"
)

// nodeHint tells how to get node and npm.
const nodeHint = "the web tests need Node.js 20 or later with npm: install them (Debian/Ubuntu: `apt-get install nodejs npm`, " +
	"or a release from https://nodejs.org/) and run the tests again"

// nodePath returns the node program, failing the test when it is missing.
func nodePath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %s", nodeHint)
	}
	return p
}

var (
	installMu sync.Mutex
	installed = map[string]string{} // dir → "" (done) or the failure
)

// ensureNodeModules runs `npm ci` in dir unless its node_modules already holds exactly what
// package-lock.json pins (npm writes node_modules/.package-lock.json last; an interrupted
// install lacks it).
func ensureNodeModules(t *testing.T, dir string) {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	if msg, done := installed[dir]; done {
		if msg != "" {
			t.Fatal(msg)
		}
		return
	}
	msg := installNodeModules(t, dir)
	installed[dir] = msg
	if msg != "" {
		t.Fatal(msg)
	}
}

func installNodeModules(t *testing.T, dir string) string {
	want, err := lockedVersions(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return dir + "/package-lock.json: " + err.Error()
	}
	have, err := lockedVersions(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err == nil && sameVersions(want, have) {
		return ""
	}
	npm, lerr := exec.LookPath("npm")
	if lerr != nil {
		return "npm not found: " + nodeHint
	}
	t.Logf("installing the npm packages of %s with npm ci (once)", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// --ignore-scripts: nothing here needs an install script (esbuild's binary comes as its
	// platform package; playwright-core never downloads a browser: the tests use Debian's).
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "npm ci in " + dir + ": " + err.Error() + "\n" + tail(string(out)) + "\n(" + nodeHint + ")"
	}
	have, err = lockedVersions(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil || !sameVersions(want, have) {
		return "after npm ci, " + dir + "/node_modules does not match package-lock.json"
	}
	return ""
}

// lockedVersions reads the installed packages' versions of a package-lock.json (or of npm's
// node_modules/.package-lock.json): path → version, optional platform packages left out.
func lockedVersions(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var lock struct {
		Packages map[string]struct {
			Version  string `json:"version"`
			Optional bool   `json:"optional"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for p, v := range lock.Packages {
		if p == "" || v.Optional || !strings.HasPrefix(p, "node_modules/") {
			continue
		}
		out[p] = v.Version
	}
	if len(out) == 0 {
		return nil, errors.New("no packages")
	}
	return out, nil
}

func sameVersions(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// runNode runs node with args in dir and returns its combined output; it fails the test
// (with the output) when node fails.
func runNode(t *testing.T, dir string, timeout time.Duration, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := execNode(ctx, t, dir, env, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node %s (in %s) did not finish within %s:\n%s", strings.Join(args, " "), dir, timeout, out.String())
	}
	if err != nil {
		t.Fatalf("node %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out.String())
	}
	return out.String()
}

// readTree reads every file under dir with one of the extensions, so that go test's cache
// knows the test depends on them (node reads them, not the test binary). It returns the paths.
func readTree(t *testing.T, dir string, exts ...string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "node_modules" || d.Name() == "dist" {
				return filepath.SkipDir
			}
			return nil
		}
		for _, e := range exts {
			if strings.HasSuffix(p, e) {
				if _, err := os.ReadFile(p); err != nil {
					return err
				}
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// execNode is the command node ARGS in dir with env added.
func execNode(ctx context.Context, t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, nodePath(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
