package backchannel

import (
	"errors"
	"fmt"

	"github.com/backchannel-io/backchannel/frames"
)

// ErrClosed is returned by the methods of a Host after Close, and is its Err.
var ErrClosed = errors.New("backchannel: host closed; Connect again (the slot stays resumable with Options.StateFile)")

// ErrUnconfirmed is returned by a request whose frame was sent just before the transport
// dropped when the broker's answer cannot tell whether it was applied, and repeating it
// could apply it twice (a milestone would be narrated twice, an ask asked again, an inject
// spoken twice). Check the job's state before repeating it. Requests that are safe to repeat
// are resent after the resume instead (see Host).
var ErrUnconfirmed = errors.New("backchannel: the connection dropped before the broker confirmed the frame, so it may or may not have been applied")

// DeferRejectedError is returned by Call.Defer when the broker answered tool_deferred_ack
// with accepted: false (SPEC 6). The call stays pending on its ordinary timeout: the handler
// may answer it, or defer it again under another handle.
type DeferRejectedError struct {
	// CallID is the call the defer named.
	CallID string
	// Handle is the handle the defer named.
	Handle string
	// Reason is the broker's reason (invalid_handle, handle_in_use, handle_burned, …).
	Reason frames.DeferAckReason
}

// Error says why the defer was rejected and what to do.
func (e *DeferRejectedError) Error() string {
	advice := ""
	if a, ok := deferAdvice[e.Reason]; ok {
		advice = ": " + a
	}
	return fmt.Sprintf("backchannel: defer of call %s as %q rejected: %s%s", e.CallID, e.Handle, e.Reason, advice)
}

// deferAdvice says what to do about each reason of a rejected defer (SPEC 6).
var deferAdvice = map[frames.DeferAckReason]string{
	frames.AckInvalidHandle:  "a handle is 1 to 128 bytes without control characters",
	frames.AckUnknownCall:    "the broker does not know the call",
	frames.AckCallNotPending: "the call is no longer pending (cancelled, timed out, answered, or deferred under another handle)",
	frames.AckNotDeferrable:  "declare the tool with Deferred: true",
	frames.AckHandleReserved: "a handle may not have the form of a broker call id (call_ and 20 characters a-z2-7)",
	frames.AckHandleInUse:    "another open job holds it; choose a fresh handle",
	frames.AckHandleBurned:   "handles are never reusable; choose a fresh one",
}

// SessionEndedError is a Host's Err after the broker ended its session (session.ended).
type SessionEndedError struct {
	// Reason is why the session ended: ended, hung_up or resume_expired.
	Reason frames.EndReason
}

// Error names the reason.
func (e *SessionEndedError) Error() string {
	return fmt.Sprintf("backchannel: the session ended (%s)", e.Reason)
}

// CancelledError is the cause (context.Cause) of a handler's or a job's context when the
// broker cancelled the call with tool_cancel (SPEC 11).
type CancelledError struct {
	// Reason is the tool_cancel reason (timeout, discard, agent_request, …).
	Reason frames.CancelReason
}

// Error names the reason.
func (e *CancelledError) Error() string {
	return fmt.Sprintf("backchannel: the broker cancelled the call (%s)", e.Reason)
}

// brokerError wraps an error frame with what was being done; errors.As finds the *frames.Error
// (and its Code).
func brokerError(what string, e *frames.Error) error {
	return fmt.Errorf("backchannel: %s: %w", what, e)
}

// deadSlot reports whether err means the slot can never be resumed again.
func deadSlot(err error) bool {
	var se *SessionEndedError
	if errors.As(err, &se) {
		return true
	}
	var fe *frames.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case frames.CodeSessionEnded, frames.CodeResumeExpired, frames.CodeResumeInvalid, frames.CodeNotFound:
			return true
		}
	}
	return false
}

// permanent reports whether a failed reconnect attempt should not be retried.
func permanent(err error) bool {
	var fe *frames.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case frames.CodeInternal, frames.CodeLimitExceeded:
			return false
		}
		return true
	}
	return false
}
