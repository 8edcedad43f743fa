// Package frames is the wire vocabulary of the Backchannel broker: one Go type per frame of
// docs/spec.md, their encoding and decoding, the validation rules of each frame, and the error codes
// of SPEC 2.1.
//
// Every frame is one JSON object with a string member "type". Client → broker frames embed
// Request (the optional id that answers echo as ref); broker → client frames embed Reply (ref
// and seq). Decode parses a frame of either direction into a pointer to its struct and reports
// every violation of SPEC 2 as a *Error — the error frame itself — with code bad_frame or
// unknown_frame and a message naming the offending field by its path:
//
//	f, err := frames.Decode(msg)
//	if err != nil {
//		reply := err.(*frames.Error) // ready to send back, Ref already set
//		...
//	}
//	switch f := f.(type) {
//	case *frames.ToolResult:
//		...
//	}
//
// A frame must be valid UTF-8 (raw bytes; JSON escapes are JSON), and a client frame may nest at
// most MaxNesting levels of objects and arrays, the frame object itself being level 1 (SPEC 2).
// CheckMember applies the same rules to JSON that reaches the broker outside a frame and goes
// on in one (the arguments of an MCP tools/call).
//
// Encode renders a frame (value or pointer) with "type" as its first member:
//
//	b, err := frames.Encode(frames.ToolCancel{CallID: id, Reason: frames.CancelTimeout})
//
// Required fields are marked with the struct tag `required:"true"`, the single source of truth
// for the decoder and for generated documentation; the doc comments of the frame types and
// their fields describe the messages. The closed sets of strings docs/spec.md names (roles, job
// states, reasons, results) are typed string constants with Valid and Enum methods.
//
// This package checks the shape of frames only: field types, required fields, the
// exactly-one-of rules and the enum values of client frames. Everything that needs state or
// configuration — tool name patterns, JSON Schema validity, limits, handles — is the broker's.
package frames
