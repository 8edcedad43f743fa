package mcp_test

// The MCP Inspector CLI (@modelcontextprotocol/inspector from npm, pinned in
// testdata/inspector/package-lock.json) against the facade: it never sends DELETE, so a second
// run against the same session must take the conversation over (SPEC 14; problem 1 of issue
// 19), and its --protocol-era modern speaks the revision 2026-07-28.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// inspectorDir is the Node.js project of the Inspector CLI.
var inspectorDir = filepath.Join(nodeDir, "inspector")

var inspectorSetup struct {
	once sync.Once
	err  error
}

// ensureInspector installs the locked Inspector (npm ci) when node_modules lacks it.
func ensureInspector(t *testing.T) string {
	t.Helper()
	ensureNode(t)
	bin := filepath.Join(inspectorDir, "node_modules", ".bin", "mcp-inspector")
	inspectorSetup.once.Do(func() {
		if _, err := os.Stat(bin); err == nil {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			inspectorSetup.err = fmt.Errorf("npm not found: %s", nodeHint)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = inspectorDir
		if out, err := cmd.CombinedOutput(); err != nil {
			inspectorSetup.err = fmt.Errorf("npm ci in %s: %v\n%s\n(%s)", inspectorDir, err, out, nodeHint)
		}
	})
	if inspectorSetup.err != nil {
		t.Fatal(inspectorSetup.err)
	}
	return bin
}

// runInspector runs the Inspector CLI once against the facade for session sid, with args, and
// returns its JSON output.
func runInspector(t *testing.T, e *env, sid string, args ...string) map[string]any {
	t.Helper()
	bin := ensureInspector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"--cli", e.mcpURL, "--transport", "http", "--header", "Authorization: Bearer " + brokertest.KeyA,
		"--header", "Backchannel-Session: " + sid, "--format", "json", "--quiet"}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	home := t.TempDir() // its catalog and client config go there
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"))
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	var res map[string]any
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("mcp-inspector %s: %v, output %q, stderr %q", strings.Join(args, " "), err, out, stderr)
	}
	if err != nil || res["error"] != nil {
		t.Fatalf("mcp-inspector %s: %v: %s (stderr %q)", strings.Join(args, " "), err, out, stderr)
	}
	return res
}

// TestInspectorTwice: two runs of the Inspector CLI in a row against one session — the first
// never sends DELETE — both succeed: the second takes the conversation over (SPEC 14). A run
// with --protocol-era modern (2026-07-28) then calls a tool of the same conversation.
func TestInspectorTwice(t *testing.T) {
	t.Parallel()
	e := startEnv(t, "memory", suiteConfig())
	sid, _ := e.sessionWithHost(lookupTool)
	for run := 1; run <= 2; run++ {
		res := runInspector(t, e, sid, "--method", "tools/list")
		b, _ := json.Marshal(res)
		if !strings.Contains(string(b), `"name":"lookup"`) || !strings.Contains(string(b), `"name":"wait"`) {
			t.Errorf("run %d of the Inspector, tools/list: %s, want lookup and wait", run, b)
		}
	}
	res := runInspector(t, e, sid, "--protocol-era", "modern", "--method", "tools/call", "--tool-name", "status",
		"--tool-args-json", `{"state":"working","title":"Inspecting"}`)
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), "Status set to `working`: Inspecting") {
		t.Errorf("the Inspector with --protocol-era modern, tools/call status: %s", b)
	}
}
