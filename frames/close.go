package frames

// The WebSocket close status codes of the protocol (RFC 6455; SPEC 1, 3, 10, 18).
const (
	// CloseNormal: session.ended was the last frame.
	CloseNormal = 1000
	// ClosePolicy: a refused hello, a hello timeout, resumed elsewhere, repeated limit violations.
	ClosePolicy = 1008
	// CloseTooBig: a message over the transport's hard limit.
	CloseTooBig = 1009
	// CloseServiceRestart: shutdown with a shared store, or a broken relay: resume, on another node.
	CloseServiceRestart = 1012
	// CloseTryAgainLater: a slow consumer (the send queue overflowed).
	CloseTryAgainLater = 1013
)
