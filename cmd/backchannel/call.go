package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/backchannel-io/backchannel/frames"
	backchannel "github.com/backchannel-io/backchannel/sdk/go"
)

// call runs `backchannel call`: a one-shot text agent (SPEC 13). It attaches to a session as
// the agent, calls a tool, prints the result — and when the call went to the background,
// waits for it with the built-in `wait` and prints that result too.
func call(args []string) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	url := fs.String("url", "ws://127.0.0.1:8080/v1/ws", "broker WebSocket URL (http://HOST:PORT or ws://HOST:PORT alone get /v1/ws)")
	session := fs.String("session", "", "session id (required)")
	token := fs.String("token", "", "the session's join token")
	key := fs.String("key", "", "an API key of the session's tenant (instead of -token)")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the result")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: backchannel call -session ID (-token T | -key K) TOOL [ARGUMENTS_JSON]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *session == "" || fs.NArg() < 1 {
		fs.Usage()
		return errors.New("a session and a tool name are required")
	}
	arguments := json.RawMessage(`{}`)
	if fs.NArg() > 1 {
		arguments = json.RawMessage(fs.Arg(1))
		if !json.Valid(arguments) {
			return fmt.Errorf("arguments %q are not JSON", fs.Arg(1))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	endpoint, err := backchannel.EndpointURL(*url)
	if err != nil {
		return err
	}
	c, err := dialFrames(ctx, endpoint, nil)
	if err != nil {
		return err
	}
	defer c.close()
	send := func(f frames.Frame) error { return c.send(ctx, f) }
	// read returns the next frame; an error frame is returned as the error.
	read := func() (frames.Frame, error) {
		for {
			b, err := c.next(ctx)
			if err != nil {
				return nil, err
			}
			f, err := frames.Decode(b)
			if err != nil {
				continue
			}
			if e, ok := f.(*frames.Error); ok {
				return nil, e
			}
			return f, nil
		}
	}
	if err := send(&frames.Hello{Protocol: frames.Protocol, Role: frames.RoleAgent, SessionID: *session, JoinToken: *token, APIKey: *key}); err != nil {
		return err
	}
	if _, err := read(); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if err := send(&frames.AgentToolCall{CallID: "cli-1", ConversationID: "root", Name: fs.Arg(0), Arguments: arguments}); err != nil {
		return err
	}
	for {
		f, err := read()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *frames.AgentPrompt:
			fmt.Printf("[prompt] %s\n", f.Text)
		case *frames.AgentToolResult:
			fmt.Printf("[%s %s]\n%s\n", f.CallID, f.Kind, f.Content)
			if f.CallID == "cli-1" && f.Kind == frames.ResultKindBackgroundPlaceholder {
				if err := send(&frames.AgentToolCall{CallID: "cli-wait", ConversationID: "root", Name: "wait",
					Arguments: json.RawMessage(`{"tool_call_id":"cli-1"}`)}); err != nil {
					return err
				}
				continue
			}
			return nil
		}
	}
}
