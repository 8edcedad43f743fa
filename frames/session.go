package frames

// Protocol is the protocol version every hello names (SPEC 3.2).
const Protocol = "backchannel.v1"

// Hello is the first frame of every WebSocket connection (SPEC 3.2): it names the protocol and
// the connection's role and either creates a session (api_key alone), attaches to one
// (session_id with join_token or api_key; a caller also with caller_token), or resumes a slot
// (session_id with resume_token and last_seq). Tools listed here are declared as by
// tools.declare.
type Hello struct {
	Request
	// Protocol must be "backchannel.v1".
	Protocol string `json:"protocol" required:"true"`
	// Role is the part the connection plays: host, caller or agent.
	Role Role `json:"role" required:"true"`
	// SessionID names the session to attach to or resume; absent with api_key creates one.
	SessionID string `json:"session_id,omitempty"`
	// APIKey authenticates as a tenant: alone it creates a session, with session_id it attaches.
	APIKey string `json:"api_key,omitempty"`
	// JoinToken attaches to the session of session_id.
	JoinToken string `json:"join_token,omitempty"`
	// CallerToken attaches a caller (and only a caller) to the session of session_id: the end
	// user's token, which caller_url carries (SPEC 3.1).
	CallerToken string `json:"caller_token,omitempty"`
	// ResumeToken resumes the slot it was issued for (SPEC 10).
	ResumeToken string `json:"resume_token,omitempty"`
	// LastSeq is the seq of the last frame the resuming client saw; the broker replays the
	// frames after it.
	LastSeq int64 `json:"last_seq,omitempty"`
	// Tools declares the connection's tools, answered by tools.declared right after welcome.
	Tools []ToolDecl `json:"tools,omitempty"`
}

// FrameType returns "hello".
func (Hello) FrameType() string { return "hello" }

// Validate checks the protocol, the role and the tool declarations.
func (f Hello) Validate() error {
	if f.Protocol != Protocol {
		return badFrame("field protocol must be %q", Protocol)
	}
	if !f.Role.Valid() {
		return badEnum("role", roles)
	}
	return validateTools(f.Tools)
}

// Welcome is the broker's answer to a successful hello (SPEC 3.3). It carries the session, the
// connection's id, a fresh resume token for the connection's slot and the timing parameters;
// join_token is present when the hello created the session. Welcome carries no seq.
type Welcome struct {
	Reply
	// SessionID is the session the connection is attached to.
	SessionID string `json:"session_id" required:"true"`
	// ConnectionID identifies this connection.
	ConnectionID string `json:"connection_id" required:"true"`
	// ResumeToken resumes this connection's slot after a drop (single use, rotated on resume).
	ResumeToken string `json:"resume_token" required:"true"`
	// ResumeWindowMS is how long a dropped slot waits for its connection to come back.
	ResumeWindowMS int64 `json:"resume_window_ms" required:"true"`
	// HeartbeatMS is the WebSocket ping interval.
	HeartbeatMS int64 `json:"heartbeat_ms" required:"true"`
	// ServerTimeMS is the broker's clock, epoch milliseconds.
	ServerTimeMS int64 `json:"server_time_ms" required:"true"`
	// JoinToken lets further connections attach to a session this hello created.
	JoinToken string `json:"join_token,omitempty"`
}

// FrameType returns "welcome".
func (Welcome) FrameType() string { return "welcome" }

// SessionEnd asks the broker to end the session (SPEC 3.6); any role may send it. Every open
// job is cancelled with reason discard and every connection receives session.ended.
type SessionEnd struct {
	Request
}

// FrameType returns "session.end".
func (SessionEnd) FrameType() string { return "session.end" }

// SessionEnded is the last frame of every connection of an ended session (SPEC 3.6); the
// connection is then closed with status 1000.
type SessionEnded struct {
	Reply
	// Reason is why the session ended: ended, hung_up or resume_expired.
	Reason EndReason `json:"reason" required:"true"`
}

// FrameType returns "session.ended".
func (SessionEnded) FrameType() string { return "session.ended" }
