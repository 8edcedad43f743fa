package openai

import (
	"log/slog"
	"net/http"
	"time"
)

// Defaults of Options.
const (
	// DefaultURL is OpenAI's Realtime endpoint.
	DefaultURL = "wss://api.openai.com/v1/realtime"
	// DefaultModel is the Realtime model asked for.
	DefaultModel = "gpt-realtime"
	// DefaultTranscriptionModel transcribes the caller's speech.
	DefaultTranscriptionModel = "gpt-4o-mini-transcribe"
	// DefaultDialTimeout bounds connecting and the WebSocket handshake.
	DefaultDialTimeout = 10 * time.Second
	// DefaultRespondTimeout bounds how long Respond waits for its response.created.
	DefaultRespondTimeout = 5 * time.Second
	// DefaultReadLimit is the largest server event accepted, in bytes.
	DefaultReadLimit = 16 << 20
	// DefaultSendQueueBytes is how many bytes of client events may wait for the connection
	// before it is given up as stalled.
	DefaultSendQueueBytes = 8 << 20
	// DefaultReconnectTimeout bounds how long a dropped connection is redialled.
	DefaultReconnectTimeout = 2 * time.Minute
	// DefaultReconnectInterval is the first pause between redials of a dropped connection.
	DefaultReconnectInterval = 250 * time.Millisecond
	// MaxReconnectInterval is the longest pause between redials: the pause doubles from
	// ReconnectInterval up to it, with ±50 % jitter.
	MaxReconnectInterval = 10 * time.Second
)

// Options configure the adapter. The zero value of a field means its documented default.
type Options struct {
	// URL is the Realtime endpoint (default DefaultURL); the adapter adds ?model=Model. Any
	// Realtime-compatible server works; ws:// and http:// URLs are accepted for local servers.
	URL string
	// APIKey is sent as "Authorization: Bearer APIKey" (no header when empty).
	APIKey string
	// Model is the Realtime model (default DefaultModel).
	Model string
	// Voice is the output voice when the session's model.Config names none (empty: the
	// server's default).
	Voice string
	// Instructions are the session instructions when the session's model.Config has none
	// (empty: a short built-in persona). The adapter always appends the rules a voice agent of
	// the broker follows (background jobs, notes, cancel_job, permissions).
	Instructions string
	// TranscriptionModel transcribes the caller's speech (default DefaultTranscriptionModel).
	TranscriptionModel string
	// Logger receives the adapter's logs (default slog.Default()).
	Logger *slog.Logger
	// HTTPClient dials the WebSocket (default http.DefaultClient); tests and proxies set it.
	HTTPClient *http.Client
	// DialTimeout bounds the dial (default DefaultDialTimeout).
	DialTimeout time.Duration
	// RespondTimeout bounds how long Respond waits for its response to be created, behind
	// the active response if there is one (default DefaultRespondTimeout).
	RespondTimeout time.Duration
	// ReadLimit is the largest server event accepted (default DefaultReadLimit).
	ReadLimit int64
	// SendQueueBytes bounds the client events waiting to be written; a connection that stalls
	// beyond it is closed and reported (default DefaultSendQueueBytes).
	SendQueueBytes int
	// ReconnectTimeout bounds how long a dropped connection (a read error, the server closing
	// it, a failed or stalled write) is redialled before the model gives up, reports Error and
	// stays closed (default DefaultReconnectTimeout; negative: a dropped connection is not
	// redialled). See the package documentation.
	ReconnectTimeout time.Duration
	// ReconnectInterval is the first pause between redials; it doubles, with jitter, up to
	// MaxReconnectInterval (default DefaultReconnectInterval). The first redial after a drop
	// is immediate.
	ReconnectInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.TranscriptionModel == "" {
		o.TranscriptionModel = DefaultTranscriptionModel
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RespondTimeout <= 0 {
		o.RespondTimeout = DefaultRespondTimeout
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = DefaultReadLimit
	}
	if o.SendQueueBytes <= 0 {
		o.SendQueueBytes = DefaultSendQueueBytes
	}
	if o.ReconnectTimeout == 0 {
		o.ReconnectTimeout = DefaultReconnectTimeout
	}
	if o.ReconnectInterval <= 0 {
		o.ReconnectInterval = DefaultReconnectInterval
	}
	return o
}
