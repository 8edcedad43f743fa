package jobs

import "github.com/backchannel-io/backchannel/frames"

// State is the state of a job (SPEC 5): the wire's job state.
type State = frames.JobState

// The states of a job. Completed, Failed, Cancelled, TimedOut and Declined are terminal.
const (
	AwaitingPermission = frames.StateAwaitingPermission
	Pending            = frames.StatePending
	Deferred           = frames.StateDeferred
	Completed          = frames.StateCompleted
	Failed             = frames.StateFailed
	Cancelled          = frames.StateCancelled
	TimedOut           = frames.StateTimedOut
	Declined           = frames.StateDeclined
)

// IsOpen reports whether s is a state a job can still leave (set and not terminal).
func IsOpen(s State) bool { return s != "" && !s.Terminal() }
