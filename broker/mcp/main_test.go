// Package mcp_test is the integration suite of the MCP facade (SPEC 14): a real broker on
// loopback (internal/brokertest, over the memory store and over Redis) serves /mcp and /v1/ws
// on one HTTP server, hosts attach over WebSocket like any host, and two independent real MCP
// clients drive /mcp over Streamable HTTP: the official Go SDK's client, in process, and the
// official TypeScript SDK's client (@modelcontextprotocol/sdk from npm, pinned in
// testdata/package-lock.json), run with Node.js by testdata/client.mjs.
//
// Every scenario runs for each client against each store; the texts checked are the exact
// texts of SPEC 13.
package mcp_test

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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
	stop := sharedRedis()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		stop()
		os.Exit(code)
	}))
}

// sharedRedis starts one private redis-server for the whole test binary and points
// BACKCHANNEL_TEST_REDIS_URL at it, so that the Redis scenarios share it (each with a key prefix
// of its own: internal/redistest) instead of starting a server each. It does nothing when the
// variable is already set, or when redis-server is missing (each Redis scenario then fails
// with redistest's install hint). A port taken between choosing and binding is retried.
func sharedRedis() (stop func()) {
	if os.Getenv("BACKCHANNEL_TEST_REDIS_URL") != "" {
		return func() {}
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return func() {}
	}
	dir, err := os.MkdirTemp("", "backchannel-mcp-redis-")
	if err != nil {
		return func() {}
	}
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			break
		}
		addr := l.Addr().String()
		_ = l.Close()
		cmd := exec.Command("redis-server", "--port", strings.Split(addr, ":")[1], "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			break
		}
		kill := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if pingRedis(addr, 5*time.Second) {
			_ = os.Setenv("BACKCHANNEL_TEST_REDIS_URL", "redis://"+addr+"/0")
			return func() {
				kill()
				_ = os.RemoveAll(dir)
			}
		}
		kill()
	}
	_ = os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "broker/mcp tests: could not start a shared redis-server; each Redis scenario starts its own")
	return func() {}
}

// pingRedis waits until the Redis server at addr answers PING.
func pingRedis(addr string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = c.Write([]byte("PING\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			_ = c.Close()
			if err == nil && strings.HasPrefix(line, "+PONG") {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
