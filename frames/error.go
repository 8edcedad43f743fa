package frames

import "fmt"

// Code is the machine-readable code of an error frame, and of every HTTP error body
// (SPEC 2.1).
type Code string

// Error codes of SPEC 2.1.
const (
	// CodeBadFrame: malformed JSON, a field of the wrong type, a missing required field, or a
	// frame that breaks a rule of its type. Nothing of the frame was applied.
	CodeBadFrame Code = "bad_frame"
	// CodeUnknownFrame: the frame's type is not one the broker knows.
	CodeUnknownFrame Code = "unknown_frame"
	// CodeUnauthorized: a missing or wrong API key, join token or credential.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden: the request is understood but not allowed (for example a second caller).
	CodeForbidden Code = "forbidden"
	// CodeNotFound: the session or resource does not exist (or belongs to another tenant).
	CodeNotFound Code = "not_found"
	// CodeLimitExceeded: a size, count or rate limit was exceeded.
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeUnknownCall: no job of the session has that call id or handle.
	CodeUnknownCall Code = "unknown_call"
	// CodeCallNotPending: the job is not in the state the frame needs.
	CodeCallNotPending Code = "call_not_pending"
	// CodeCallFinished: the job already reached a terminal state (for example a late result).
	CodeCallFinished Code = "call_finished"
	// CodeInjectRejected: an inject could not be accepted or was not spoken before the end.
	CodeInjectRejected Code = "inject_rejected"
	// CodeSessionEnded: the session has ended.
	CodeSessionEnded Code = "session_ended"
	// CodeResumeExpired: the resume token's slot (or session) expired.
	CodeResumeExpired Code = "resume_expired"
	// CodeResumeInvalid: the resume token was already used, is unknown, or frames were lost.
	CodeResumeInvalid Code = "resume_invalid"
	// CodeInternal: the broker failed; the request may be retried.
	CodeInternal Code = "internal"
)

var codes = []Code{
	CodeBadFrame, CodeUnknownFrame, CodeUnauthorized, CodeForbidden, CodeNotFound,
	CodeLimitExceeded, CodeUnknownCall, CodeCallNotPending, CodeCallFinished,
	CodeInjectRejected, CodeSessionEnded, CodeResumeExpired, CodeResumeInvalid, CodeInternal,
}

// Valid reports whether c is one of the codes of SPEC 2.1.
func (c Code) Valid() bool { return oneOf(c, codes) }

// Enum lists the error codes in SPEC order.
func (Code) Enum() []any { return enumOf(codes) }

// Error is the error frame (SPEC 2.1): the broker's answer to a frame it could not apply, or a
// notice that something failed. It carries ref when it answers a frame with an id, and
// call_id / handle when it concerns a job. Error also implements the Go error interface, so
// Decode and the broker can return it as an error and send it as a frame.
type Error struct {
	Reply
	// Code is the machine-readable error code.
	Code Code `json:"code" required:"true"`
	// Message is a human-readable explanation; for bad_frame it names the offending field.
	Message string `json:"message" required:"true"`
	// Retryable tells the client whether sending the same frame again later may succeed. It is
	// always present on the wire.
	Retryable bool `json:"retryable" required:"true"`
	// CallID is the broker call id of the job the error concerns, if any.
	CallID string `json:"call_id,omitempty"`
	// Handle is the handle of the deferred job the error concerns, if any.
	Handle string `json:"handle,omitempty"`
}

// FrameType returns "error".
func (Error) FrameType() string { return "error" }

// Error returns "CODE: MESSAGE".
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	return string(e.Code) + ": " + e.Message
}

// Errorf returns an error frame with code and a message formatted as by fmt.Sprintf. It is not
// retryable; set Retryable, Ref, CallID or Handle on the result as needed.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// badFrame returns a bad_frame error with a formatted message.
func badFrame(format string, args ...any) *Error {
	return &Error{Code: CodeBadFrame, Message: fmt.Sprintf(format, args...)}
}
