// Package mcp_test is the integration suite of the MCP facade (SPEC 14): a real broker on
// loopback (internal/brokertest, over the memory store and over a private Redis) serves /mcp
// and /v1/ws on one HTTP server, hosts attach over WebSocket like any host, and two independent
// real MCP clients drive /mcp over Streamable HTTP: the official Go SDK's client, in process,
// and the official TypeScript SDK's client (@modelcontextprotocol/sdk from npm, pinned in
// testdata/package-lock.json), run with Node.js by testdata/client.mjs.
//
// Every scenario runs for each client against each store; the texts checked are the exact
// texts of SPEC 13.
package mcp_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The scenarios mostly wait on the network: run more of them at once than there are cores
	// (unless -parallel was given).
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	goleak.VerifyTestMain(m)
}
