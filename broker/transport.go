package broker

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

// WebSocket close status codes the broker uses (RFC 6455).
const (
	StatusNormal         = 1000 // session.ended was the last frame
	StatusPolicy         = 1008 // refused hello, hello timeout, resumed elsewhere, repeated limit violations
	StatusTooBig         = 1009 // a message over the transport's hard limit
	StatusServiceRestart = 1012 // shutdown with a shared store: resume on another node
	StatusTryAgainLater  = 1013 // slow consumer: the send queue overflowed
)
