// Package asyncapi builds the AsyncAPI 2.4.0 document of the Backchannel protocol from the Go
// types of package frames, so the machine-readable contract cannot drift from the code.
//
// The document has one channel per connection role of the WebSocket endpoint /v1/ws — host,
// caller and agent — and one for the WebRTC data channel frames. Each channel's publish
// operation lists the frames a client sends to the broker, its subscribe operation the frames
// the broker sends (AsyncAPI 2.x wording: publish is what the application receives). Every
// frame type of frames.Types is one message in components.messages, named by its type string,
// whose payload schema is reflected from the frame's struct (required fields from the
// `required:"true"` tags, enums from the Enum methods, the "type" member as a constant) and
// whose description and example come from package frames: the doc comments of its types,
// fields and constants, and frames/testdata/examples.json.
//
// Those texts are copied into sources_gen.go, so a broker binary needs no source tree. The
// tests of this package fail when sources_gen.go or the checked-in docs/asyncapi.json differ
// from what package frames says today; both are rewritten by the one command
//
//	UPDATE_ASYNCAPI=1 go test ./asyncapi/
//
// The tests also validate the document with the official AsyncAPI parser (@asyncapi/parser,
// run with Node from testdata/parser) and every example against its message schema.
package asyncapi
