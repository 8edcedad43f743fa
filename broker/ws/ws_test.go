package ws_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/broker/ws"
	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// A host that stops reading while the broker writes to it is dropped once one write has taken
// Options.WriteTimeout: the write does not hang for good, and the session goes on.
func TestStuckWriteDropsTheConnection(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options{WS: ws.Options{WriteTimeout: 500 * time.Millisecond}})
	agent := wiretest.Dial(t, b.WSURL, "agent")
	w := agent.Hello(map[string]any{"role": "agent", "api_key": brokertest.KeyA})
	sid, jt := w.Str("session_id"), w.Str("join_token")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, _, hc, err := wiretest.DialWebSocket(ctx, b.WSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	defer host.CloseNow()
	hello, _ := json.Marshal(map[string]any{"type": "hello", "protocol": frames.Protocol, "role": "host",
		"session_id": sid, "join_token": jt, "tools": []map[string]any{{"name": "big",
			"description": "takes a large argument", "parameters": map[string]any{"type": "object"}}}})
	if err := host.Write(ctx, websocket.MessageText, hello); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"welcome", "tools.declared"} {
		_, m, err := host.Read(ctx)
		if err != nil || !strings.Contains(string(m), `"type":"`+want+`"`) {
			t.Fatalf("host: got %s, %v; want %s", m, err, want)
		}
	}

	// From here on the host reads nothing. 40 calls of 256 KiB arguments, 10 MiB, fill the
	// loopback's socket buffers (a few MiB while nothing is read) and leave a write blocked;
	// they stay under the send queue's 32 MiB, so the host is not dropped as a slow consumer.
	blob := strings.Repeat("x", 256<<10)
	for i := range 40 {
		id := fmt.Sprint(i)
		agent.Send(map[string]any{"type": "agent.tool_call", "id": "tc" + id, "call_id": "c" + id,
			"conversation_id": "root", "name": "big", "arguments": map[string]any{"blob": blob}})
	}
	// The broker drops the host's connection: the timeline, followed (SPEC 16), records the
	// disconnect.
	fctx, fcancel := context.WithTimeout(ctx, 15*time.Second)
	defer fcancel()
	req, err := http.NewRequestWithContext(fctx, "GET", b.URL+"/v1/sessions/"+sid+"/timeline?follow=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+brokertest.KeyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("timeline ?follow=1: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for !strings.Contains(sc.Text(), `"kind":"disconnect"`) {
		if !sc.Scan() {
			t.Fatalf("the host's stuck connection was not dropped within 15 s (timeline stream: %v)", sc.Err())
		}
	}
	// The session and the agent's connection go on: a frame of the agent is answered.
	agent.Send(map[string]any{"type": "agent.unknown", "id": "st"})
	agent.Expect(wiretest.TypeWith("error", "ref", "st", "code", "unknown_frame"))
}
