package broker

import "github.com/backchannel-io/backchannel/frames"

// Transport is one client connection as the broker sees it: a WebSocket (package broker/ws)
// or, later, a WebRTC data channel. Implementations are safe for concurrent use.
type Transport interface {
	// Send queues one encoded text frame without blocking. A connection whose queue
	// overflows is closed as a slow consumer (a drop, not the end of its session).
	Send(frame []byte)
	// SendAudio queues one binary message of agent audio (G.711 µ-law) for a caller.
	SendAudio(chunk []byte)
	// Close sends what is queued, then closes the connection with the WebSocket status code
	// and reason (≤ 123 bytes).
	Close(code int, reason string)
	// Abort drops the connection at once.
	Abort()
}

// Connection is what Node.Hello gives a transport for the connection it attached: the
// transport hands it every message it reads after the hello, and tells it when the connection
// is gone. It is a *Client when this node holds the session, and the edge of a relayed
// connection when another node does (relay.Edge).
type Connection interface {
	// SessionID is the id of the connection's session.
	SessionID() string
	// Receive takes one text message. It must be called from one goroutine.
	Receive(data []byte)
	// ReceiveAudio takes one binary message: caller audio (SPEC 17).
	ReceiveAudio(data []byte)
	// Oversized reports a message the transport refused to read whole (over MaxFrameBytes);
	// ref is its id as frames.PeekID read it from the part that was read ("" when none).
	Oversized(size int, ref string)
	// Dropped reports that the transport is gone (read error, closed, missed pongs).
	Dropped()
}

// WebSocket close status codes the broker uses (frames.Close*).
const (
	StatusNormal         = frames.CloseNormal
	StatusPolicy         = frames.ClosePolicy
	StatusTooBig         = frames.CloseTooBig
	StatusServiceRestart = frames.CloseServiceRestart
	StatusTryAgainLater  = frames.CloseTryAgainLater
)
