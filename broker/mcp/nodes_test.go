package mcp_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestMCPOnAnotherNode covers SPEC 14 and 15 with two nodes on one Redis: an MCP client talks
// to node B about a session node A holds. Node B passes its requests on to node A — the
// initialize, which binds the MCP session there, and every later request of the MCP session,
// whose id names the Backchannel session — so the client lists the host's tools on A, and
// calls one, through B.
func TestMCPOnAnotherNode(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	opts.Config = suiteConfig()
	a := startEnvOpts(t, opts, nil)
	b := startEnvOpts(t, opts, nil)
	a.b.WaitRelaying(t)
	b.b.WaitRelaying(t)
	sid, h := a.sessionWithHost(lookupTool)
	ag, info := mustConnect(t, b, clientKinds[0], brokertest.KeyA, sid)
	if info.Status != http.StatusOK || (info.Session != "" && info.Session != sid) {
		t.Errorf("initialize through node B: HTTP %d, Backchannel-Session %q; want 200 and %s", info.Status, info.Session, sid)
	}
	if mid := ag.MCPSession(); !strings.HasPrefix(mid, sid+".") {
		t.Errorf("MCP session id %q does not name its Backchannel session %s", mid, sid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	want := []string{"cancel", "lookup", "status", "wait"}
	if names, err := ag.Tools(ctx); err != nil || !slices.Equal(names, want) {
		t.Fatalf("tools/list through node B: %v (%v), want %v", names, err, want)
	}
	setWorking(t, ag)
	ch := callAsync(ctx, ag, "lookup", map[string]any{"q": "x"}, nil)
	tc := h.toolCall("lookup")
	h.result(tc.str("call_id"), `"found"`)
	o := await(t, ch, "lookup through node B")
	if o.err != nil {
		t.Fatalf("lookup through node B: %v", o.err)
	}
	expectText(t, "lookup through node B", o.r, "found", false)
}
