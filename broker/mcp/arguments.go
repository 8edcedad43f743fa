package mcp

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/backchannel-io/backchannel/frames"
)

// checkArguments applies to the arguments of a tools/call the rules of SPEC 2 that a frame's
// arguments meet: valid UTF-8 (no invalid byte is ever stored or passed on to another client)
// and at most frames.MaxNesting levels in the tool_call a host gets, where they are a member
// (frames.CheckMember). The SDK decodes params.arguments as raw JSON and checks neither (its
// own nesting limit is 1,000 levels), and the arguments go to the host as they are. Absent
// arguments are the empty object. A call that breaks a rule is answered with JSON-RPC error
// -32602 (invalid params: SPEC 14) and reaches no host.
func checkArguments(args json.RawMessage) error {
	if len(args) == 0 {
		return nil
	}
	if e := frames.CheckMember("arguments", args); e != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + e.Message}
	}
	return nil
}
