"""The exceptions of the SDK.

Every exception the SDK raises is a BackchannelError with a ``retryable`` attribute: whether
doing the same thing again later may succeed. An error frame of the broker (SPEC 2.1) is raised
as the BrokerError subclass named after its code (``call_finished`` → CallFinishedError, …),
with the frame's ``code``, ``message``, ``retryable``, ``call_id`` and ``handle``.
"""

from typing import Any

__all__ = [
    "BackchannelError", "BrokerError", "BadFrameError", "UnknownFrameError", "UnauthorizedError",
    "ForbiddenError", "NotFoundError", "LimitExceededError", "UnknownCallError",
    "CallNotPendingError", "CallFinishedError", "InjectRejectedError", "SessionEndedError",
    "ResumeExpiredError", "ResumeInvalidError", "InternalError", "DeferRejected",
    "DeferRejectedError", "JobCancelled", "ClosedError", "UnconfirmedError", "ConnectError",
    "ProtocolError", "FrameError", "ERRORS_BY_CODE", "broker_error",
]


class BackchannelError(Exception):
    """The base of every exception of the SDK."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class BrokerError(BackchannelError):
    """The broker answered with an error frame (SPEC 2.1).

    ``code`` is the frame's code, ``message`` its text, ``retryable`` whether the same frame may
    succeed later, ``call_id`` / ``handle`` the job it concerns (or None), and ``frame`` the
    backchannel.frames.Error itself.
    """

    code: str = ""

    def __init__(self, message: str, *, code: str | None = None, retryable: bool = False,
                 call_id: str | None = None, handle: str | None = None, frame: Any = None,
                 what: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.call_id = call_id
        self.handle = handle
        self.frame = frame
        text = f"backchannel: {what}: {self.code}: {message}" if what else f"backchannel: {self.code}: {message}"
        super().__init__(text, retryable=retryable)


class BadFrameError(BrokerError):
    """``bad_frame``: malformed JSON, a wrong field type, a missing field; the message names it."""

    code = "bad_frame"


class UnknownFrameError(BrokerError):
    """``unknown_frame``: the broker does not know the frame's type."""

    code = "unknown_frame"


class UnauthorizedError(BrokerError):
    """``unauthorized``: a wrong API key or token."""

    code = "unauthorized"


class ForbiddenError(BrokerError):
    """``forbidden``: this connection may not send that frame (another slot's job, a role rule)."""

    code = "forbidden"


class NotFoundError(BrokerError):
    """``not_found``: no such session (or one of another tenant)."""

    code = "not_found"


class LimitExceededError(BrokerError):
    """``limit_exceeded``: a frame, argument, tool or job limit of SPEC 2."""

    code = "limit_exceeded"


class UnknownCallError(BrokerError):
    """``unknown_call``: the broker knows no such call or handle in this session."""

    code = "unknown_call"


class CallNotPendingError(BrokerError):
    """``call_not_pending``: the call is no longer pending."""

    code = "call_not_pending"


class CallFinishedError(BrokerError):
    """``call_finished``: the job is over (completed, failed, cancelled or timed out)."""

    code = "call_finished"


class InjectRejectedError(BrokerError):
    """``inject_rejected``: the agent cannot take the inject now (``retryable`` says if later)."""

    code = "inject_rejected"


class SessionEndedError(BrokerError):
    """The session has ended: ``session_ended`` from the broker, or the session.ended frame.

    ``reason`` is the session.ended reason (``ended``, ``hung_up``, ``resume_expired``) when the
    end was seen, else None.
    """

    code = "session_ended"

    def __init__(self, message: str = "the session ended", *, reason: str | None = None, **kw: Any) -> None:
        self.reason = reason
        if reason and message == "the session ended":
            message = f"the session ended ({reason})"
        super().__init__(message, **kw)


class ResumeExpiredError(BrokerError):
    """``resume_expired``: the slot's resume window ran out; its jobs were cancelled."""

    code = "resume_expired"


class ResumeInvalidError(BrokerError):
    """``resume_invalid``: the resume token was already used, or frames were lost."""

    code = "resume_invalid"


class InternalError(BrokerError):
    """``internal``: the broker failed; usually retryable."""

    code = "internal"


#: The BrokerError subclass of every code of SPEC 2.1.
_CODE_CLASSES: tuple[type[BrokerError], ...] = (
    BadFrameError, UnknownFrameError, UnauthorizedError, ForbiddenError, NotFoundError,
    LimitExceededError, UnknownCallError, CallNotPendingError, CallFinishedError,
    InjectRejectedError, SessionEndedError, ResumeExpiredError, ResumeInvalidError,
    InternalError,
)
ERRORS_BY_CODE: dict[str, type[BrokerError]] = {c.code: c for c in _CODE_CLASSES}


def broker_error(frame: Any, what: str | None = None) -> BrokerError:
    """The exception for an error frame (a backchannel.frames.Error)."""
    cls = ERRORS_BY_CODE.get(frame.code, BrokerError)
    kw: dict[str, Any] = dict(retryable=bool(frame.retryable), call_id=frame.call_id,
                              handle=frame.handle, frame=frame, what=what)
    if cls is BrokerError:
        kw["code"] = frame.code
    return cls(frame.message, **kw)


_DEFER_ADVICE = {
    "invalid_handle": "a handle is 1 to 128 bytes without control characters",
    "unknown_call": "the broker does not know the call",
    "call_not_pending": "the call is no longer pending (cancelled, timed out, answered, or deferred under another handle)",
    "not_deferrable": "declare the tool with deferred=True",
    "handle_reserved": "a handle may not have the form of a broker call id (call_ and 20 characters a-z2-7)",
    "handle_in_use": "another open job holds it; choose a fresh handle",
    "handle_burned": "handles are never reusable; choose a fresh one",
}


class DeferRejected(BackchannelError):
    """tool_deferred_ack said ``accepted: false`` (SPEC 6).

    ``reason`` is the broker's reason (``invalid_handle``, ``unknown_call``, ``call_not_pending``,
    ``not_deferrable``, ``handle_reserved``, ``handle_in_use``, ``handle_burned``); ``call_id``,
    ``handle`` and ``ack`` (the ToolDeferredAck frame) say which defer. The call stays pending
    on its ordinary timeout: answer it, or defer it under another handle.
    """

    def __init__(self, call_id: str, handle: str, reason: str, ack: Any = None) -> None:
        self.call_id = call_id
        self.handle = handle
        self.reason = reason
        self.ack = ack
        advice = _DEFER_ADVICE.get(reason)
        super().__init__(f"backchannel: defer of call {call_id} as {handle!r} rejected: {reason}"
                         + (f": {advice}" if advice else ""))


#: The same class under the name the Go and JS SDKs use.
DeferRejectedError = DeferRejected


class JobCancelled(BackchannelError):
    """The broker cancelled the job (tool_cancel, SPEC 11) while the SDK waited for it, for
    example in Job.ask. ``reason`` is the tool_cancel reason (``timeout``, ``discard``,
    ``caller_request``, ``agent_request``, ``host_request``, ``parent_cancelled``)."""

    def __init__(self, reason: str, call_id: str | None = None, handle: str | None = None) -> None:
        self.reason = reason
        self.call_id = call_id
        self.handle = handle
        super().__init__(f"backchannel: the broker cancelled the job ({reason})")


class ClosedError(BackchannelError):
    """The connection was closed with close() (or stopped for good); the slot stays resumable
    for the resume window, and with a state file a new process can resume it."""


class UnconfirmedError(BackchannelError):
    """The connection dropped right after the frame was sent, and repeating it could apply it
    twice (a milestone narrated twice, an ask asked again, an inject spoken twice): it may or
    may not have been applied. Look at the job before sending it again."""


class ConnectError(BackchannelError):
    """The broker could not be reached (or the connection failed before its welcome)."""

    retryable = True


class ProtocolError(BackchannelError):
    """The broker answered with a frame the SDK did not expect."""


class FrameError(BackchannelError):
    """A message is not a frame of this protocol revision (decode); ``raw`` is the JSON object
    when it was one."""

    def __init__(self, message: str, raw: Any = None) -> None:
        self.raw = raw
        super().__init__(message)
