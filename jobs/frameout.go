package jobs

// FrameOut is a frame an operation's transition appends to a slot's outbox in the transition's
// own atomic step (SPEC 15: "the frames a transition produces are appended to the outboxes
// inside the same script as the transition"): the tool_call of a new job (NewCall.Frame) and
// the tool_deferred_ack of an accepted defer (Engine.DeferWithFrame). The caller sets Slot, Seq
// and Max and Render; the engine renders Data when it builds the transition and sets Applied
// once the store applied a transition carrying it, into the outbox its session's journal keeps
// (cluster.Journal, which the broker's store implements too).
type FrameOut struct {
	Slot string
	Seq  int64
	// Max is how many frames the outbox keeps.
	Max int
	// Render encodes the frame, seq included, from the operation's outcome: the *Job a Call
	// creates, or the frames.ToolDeferredAck of a Defer.
	Render func(outcome any) []byte
	// Data is the rendered frame.
	Data []byte
	// Applied reports that a transition carrying the frame was applied.
	Applied bool
}
