package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guardRequest sends method path to base with the Host header host ("" for base's), the
// Origin header origin ("" for none) and key as bearer token; it returns the status and body.
func guardRequest(t *testing.T, base, method, path, host, origin, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if path == "/mcp" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// mcpInitialize is the body of an MCP initialize request.
const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"guard-test","version":"1"}}}`

// wantForbidden checks a 403 with the error body {code: forbidden, message}.
func wantForbidden(t *testing.T, what string, status int, body string) {
	t.Helper()
	var m map[string]any
	if status != http.StatusForbidden || json.Unmarshal([]byte(body), &m) != nil || m["code"] != "forbidden" || m["message"] == "" {
		t.Errorf("%s: %d %s, want 403 {code: forbidden, message}", what, status, body)
	}
}

// TestProcessServeOriginsAndHosts runs the binary (SPEC 18): in dev mode (no --api-keys) a Host
// header that is not loopback is refused on every route, and a foreign Origin is refused on
// the HTTP API and /mcp while the broker's own is served; with --api-keys and
// --allowed-origins, any Host is served and a listed origin passes.
func TestProcessServeOriginsAndHosts(t *testing.T) {
	t.Parallel()
	p, base := startServeProc(t, "serve-dev-guard")
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	for _, path := range []string{"/healthz", "/", "/v1/sessions"} {
		method := "GET"
		if path == "/v1/sessions" {
			method = "POST"
		}
		st, body := guardRequest(t, base, method, path, "evil.example:"+port, "", "dev", "")
		wantForbidden(t, "dev mode, "+path+" with Host evil.example", st, body)
	}
	if st, body := guardRequest(t, base, "GET", "/healthz", "localhost:"+port, "", "", ""); st != http.StatusOK {
		t.Errorf("dev mode, Host localhost: %d %s, want 200", st, body)
	}
	st, body := guardRequest(t, base, "POST", "/v1/sessions", "", "https://evil.example", "dev", "")
	wantForbidden(t, "dev mode, POST /v1/sessions with a foreign Origin", st, body)
	st, body = guardRequest(t, base, "POST", "/mcp", "", "https://evil.example", "dev", mcpInitialize)
	wantForbidden(t, "dev mode, MCP initialize with a foreign Origin", st, body)
	if st, body := guardRequest(t, base, "POST", "/v1/sessions", "localhost:"+port, "http://localhost:"+port, "dev", ""); st != http.StatusCreated {
		t.Errorf("dev mode, POST /v1/sessions from the try-it page's origin: %d %s, want 201", st, body)
	}
	if st, body := guardRequest(t, base, "GET", "/readyz", "", "", "", ""); st != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Errorf("/readyz: %d %s, want 200 with ready true", st, body)
	}
	p.signal(syscall.SIGTERM)
	p.expectExit0()

	p, base = startServeProc(t, "serve-keys-guard", "--api-keys", "acme=k1", "--allowed-origins", "https://app.example/")
	if st, body := guardRequest(t, base, "POST", "/v1/sessions", "api.example.com", "", "k1", ""); st != http.StatusCreated {
		t.Errorf("with --api-keys, Host api.example.com: %d %s, want 201", st, body)
	}
	if st, body := guardRequest(t, base, "POST", "/v1/sessions", "", "https://app.example", "k1", ""); st != http.StatusCreated {
		t.Errorf("Origin https://app.example, listed: %d %s, want 201", st, body)
	}
	st, body = guardRequest(t, base, "POST", "/mcp", "", "https://app.example.evil", "k1", mcpInitialize)
	wantForbidden(t, "MCP initialize with an unlisted Origin", st, body)
	p.signal(syscall.SIGTERM)
	p.expectExit0()
}
