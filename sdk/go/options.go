package backchannel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/backchannel-io/backchannel/frames"
)

// Options configure Connect. URL and one way to authenticate are required: APIKey (alone it
// creates a session, with SessionID it attaches to one), SessionID with JoinToken, or a
// StateFile left by an earlier run of the host.
type Options struct {
	// URL is the broker's WebSocket endpoint, ws://HOST:PORT/v1/ws (or wss://). An http://,
	// https://, ws:// or wss:// URL without a path gets /v1/ws appended.
	URL string
	// APIKey authenticates as a tenant. With SessionID empty, Connect creates a session (and
	// JoinToken reports its join token); with SessionID it attaches to that session.
	APIKey string
	// SessionID names the session to attach to, with APIKey or JoinToken.
	SessionID string
	// JoinToken attaches to the session SessionID names.
	JoinToken string
	// Tools are declared in the hello; Connect returns once the broker confirmed them.
	Tools []Tool
	// StateFile, when set, keeps {session_id, resume_token, last_seq} on disk (SPEC 10) so that
	// a restarted host process resumes its slot instead of creating or joining a session: when
	// the file exists, Connect resumes from it, the broker replays the frames after the saved
	// last_seq, and jobs this process does not know yet are handed to OnResume. The file is
	// written atomically after every welcome and at least every 32 frames or every second; it
	// is removed when the slot can never be resumed again (the session ended, the resume
	// window passed, or the token was refused). It holds secrets: it is created with mode 0600.
	StateFile string
	// HTTPClient dials the WebSocket (nil: http.DefaultClient). Its Transport must return
	// writable response bodies for the handshake, as *http.Transport does.
	HTTPClient *http.Client
	// Logger receives the host's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Backoff returns the policy for one reconnect episode, called each time the transport
	// drops (nil: exponential with jitter from 250 ms up to 5 s between attempts, giving up
	// after the resume window the broker announced in its welcome). The first attempt is
	// immediate; when the policy returns backoff.Stop the host stops with the last error.
	Backoff func() backoff.BackOff
	// OnEvent, when set, receives connection events and every server frame that is not the
	// answer to one of this host's requests (tool_job_narration, tool_interaction_answer,
	// session.ended, …; tool_call, tool_cancel and tool_deferred_resume too, after the SDK
	// acted on them). Events are delivered in order on one goroutine of their own; OnEvent
	// may call the Host's methods, but a slow OnEvent delays the events after it.
	OnEvent func(Event)
	// OnResume, when set, is called for every deferred job that tool_deferred_resume lists
	// and that this Host does not know — typically after a restart with StateFile — so the
	// application can re-attach its worker: finish the job with job.Result or job.Fail. Each
	// call runs on its own goroutine with the job's context. Jobs the Host already knows keep
	// their *Job and are not passed to OnResume.
	OnResume func(ctx context.Context, job *Job, info frames.ResumedJob)
}

// wsURL normalizes Options.URL to the WebSocket endpoint.
func wsURL(raw string) (string, error) { return EndpointURL(raw) }

// EndpointURL turns a broker address into its WebSocket endpoint, as Options.URL is read: a
// ws://, wss://, http:// or https:// URL without a path gets /v1/ws.
func EndpointURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("backchannel: Options.URL is empty: set it to the broker's ws://HOST:PORT/v1/ws")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("backchannel: Options.URL %q is not a URL: %w", raw, err)
	}
	switch u.Scheme {
	case "ws", "wss", "http", "https":
	default:
		return "", fmt.Errorf("backchannel: Options.URL %q must start with ws://, wss://, http:// or https://", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("backchannel: Options.URL %q has no host", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/ws"
	}
	return u.String(), nil
}

// check reports the first problem of opts that Connect cannot work with; hasState tells
// whether a state file to resume from exists.
func (o *Options) check(hasState bool) error {
	if !hasState {
		switch {
		case o.JoinToken != "" && o.SessionID == "":
			return errors.New("backchannel: Options.JoinToken needs Options.SessionID, the session it belongs to")
		case o.APIKey == "" && o.JoinToken == "":
			return errors.New("backchannel: set Options.APIKey (to create or attach to a session) or Options.SessionID with Options.JoinToken")
		}
	}
	return checkTools(o.Tools)
}

// checkTools checks what only the SDK can: one handler per tool, names unique.
func checkTools(tools []Tool) error {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t.Decl.Name == "" {
			return fmt.Errorf("backchannel: tools[%d] has no name: set Tool.Decl.Name", i)
		}
		if t.Handler == nil {
			return fmt.Errorf("backchannel: tool %q has no Handler", t.Decl.Name)
		}
		if seen[t.Decl.Name] {
			return fmt.Errorf("backchannel: tool %q is listed twice", t.Decl.Name)
		}
		seen[t.Decl.Name] = true
	}
	return nil
}

// defaultBackoff is the reconnect policy when Options.Backoff is nil: exponential with jitter,
// giving up after the resume window.
func defaultBackoff(window time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 250 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.RandomizationFactor = 0.5
	b.Multiplier = 2
	b.MaxElapsedTime = window
	b.Reset()
	return b
}
