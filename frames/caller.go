package frames

// CallerText is a caller turn given as text (SPEC 17), treated exactly like a final transcript
// of caller speech and echoed back as a transcript with role caller.
type CallerText struct {
	Request
	// Text is what the caller says.
	Text string `json:"text" required:"true"`
}

// FrameType returns "caller.text".
func (CallerText) FrameType() string { return "caller.text" }

// Transcript carries the text of caller or agent speech to a caller connection (SPEC 17);
// agent transcripts name the model response they belong to.
type Transcript struct {
	Reply
	// Role is who spoke: agent or caller.
	Role Role `json:"role" required:"true"`
	// Text is the transcript text (partial or final).
	Text string `json:"text" required:"true"`
	// ResponseID is the agent response the speech belongs to.
	ResponseID string `json:"response_id,omitempty"`
	// Final tells whether the text is final. Always present.
	Final bool `json:"final" required:"true"`
}

// FrameType returns "transcript".
func (Transcript) FrameType() string { return "transcript" }
