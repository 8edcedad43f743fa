package frames

// The WebSocket close status codes of the protocol (RFC 6455; SPEC 1, 3, 10, 18).
const (
	CloseNormal         = 1000 // session.ended was the last frame
	ClosePolicy         = 1008 // refused hello, hello timeout, resumed elsewhere, repeated limit violations
	CloseTooBig         = 1009 // a message over the transport's hard limit
	CloseServiceRestart = 1012 // shutdown with a shared store, or a broken relay: resume, on another node
	CloseTryAgainLater  = 1013 // slow consumer: the send queue overflowed
)
