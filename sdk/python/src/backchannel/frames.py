"""The frames of protocol ``backchannel.v1`` (docs/spec.md) that the host and agent roles speak.

Every frame is a dataclass whose fields are the frame's JSON members, named exactly as on the
wire. A member the frame may leave out defaults to ``None`` (and is left out when encoded);
the others are required. ``TYPE`` is the frame's ``type``, ``DIRECTION`` says who sends it
(``"client"``: a host or agent sends it to the broker; ``"broker"``: the broker sends it), and
``ROLES`` the roles (AsyncAPI channels) whose connections speak it. The test
``tests/test_frames.py`` checks all of this against ``docs/asyncapi.json``.

``encode(frame)`` turns a frame into one JSON text message; ``decode(text)`` parses a broker
message into its frame (unknown members are ignored, as the protocol says).
"""

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

from .errors import FrameError

__all__ = [
    "PROTOCOL", "Frame", "ToolDecl", "Interaction", "ResumedJob",
    "Hello", "Welcome", "Error", "ToolsDeclare", "ToolsDeclared", "ToolCall", "ToolDeferred",
    "ToolDeferredAck", "ToolProgress", "ToolPartialResult", "ToolResult", "JobCancel",
    "JobCancelResult", "ToolCancel", "ToolJobNarration", "ToolJobDeliveryFailed",
    "ToolInteractionAnswer", "ToolInteractionUpdate", "ToolInteractionUpdateAck",
    "ToolDeferredResume", "Inject", "SessionEnd", "SessionEnded", "AgentToolCall",
    "AgentToolResult", "AgentTurnStart", "AgentTurnEnd", "AgentMessage", "AgentMessageCommitted",
    "AgentPrompt", "AgentLocalResult", "AgentLocalCancel", "AgentInteractionAnswer", "AgentFinal",
    "ConversationCreate", "ConversationCreated", "ConversationCancel",
    "FRAME_TYPES", "encode", "decode", "to_wire", "is_broker_call_id",
]

PROTOCOL = "backchannel.v1"

# Enumerations of the protocol (asyncapi components/schemas), as Literal types.
Role = Literal["host", "caller", "agent"]
Code = Literal[
    "bad_frame", "unknown_frame", "unauthorized", "forbidden", "not_found", "limit_exceeded",
    "unknown_call", "call_not_pending", "call_finished", "inject_rejected", "session_ended",
    "resume_expired", "resume_invalid", "internal",
]
DeferAckReason = Literal[
    "invalid_handle", "unknown_call", "call_not_pending", "not_deferrable", "handle_reserved",
    "handle_in_use", "handle_burned",
]
CancelReason = Literal["timeout", "discard", "caller_request", "agent_request", "host_request", "parent_cancelled"]
CancelResult = Literal["cancelled", "already_done", "already_canceled", "unknown_call"]
JobState = Literal["awaiting_permission", "pending", "deferred", "completed", "failed", "cancelled", "timed_out", "declined"]
NarrationKind = Literal["milestone", "interaction", "completion"]
NarrationState = Literal["queued", "speaking", "delivered", "interrupted", "skipped", "stopped", "failed"]
DeliveryFailureReason = Literal["no_audible_speech", "model_error", "session_ended", "floor_timeout"]
InteractionState = Literal["resolved", "cancelled", "superseded"]
InteractionUpdateResult = Literal["applied", "already_closed", "unknown_interaction"]
EndReason = Literal["ended", "hung_up", "resume_expired"]
ToolResultKind = Literal["result", "background_placeholder", "error"]
ExpectedDuration = Literal["instant", "seconds", "minutes", "hours"]

#: Any JSON value (what json.loads returns).
JSONValue = Any
#: A duration flag of a tool declaration: integer milliseconds or a Go duration string ("90s").
Duration = Union[int, str]

_KW = dict(kw_only=True)


class Frame:
    """Base of every frame class."""

    TYPE: ClassVar[str] = ""
    DIRECTION: ClassVar[str] = ""
    ROLES: ClassVar[tuple[str, ...]] = ()


# Parts of frames.


@dataclass(**_KW)
class ToolDecl:
    """One tool a host serves (SPEC 4)."""

    name: str
    description: str
    parameters: dict[str, Any]
    timeout: Duration | None = None
    deferred: bool | None = None
    deferred_timeout: Duration | None = None
    requires_permission: bool | None = None
    expected_duration: ExpectedDuration | None = None
    notify_on_complete: bool | None = None


@dataclass(**_KW)
class Interaction:
    """A question a running job puts to the caller or agent (SPEC 9)."""

    prompt: str
    id: str | None = None
    options: list[str] | None = None


@dataclass(**_KW)
class ResumedJob:
    """One open deferred job listed by tool_deferred_resume (SPEC 10)."""

    call_id: str
    handle: str
    name: str
    arguments: JSONValue
    status_label: str
    state: JobState
    deadline_ms: int
    open_interaction: Interaction | None = None


# Frames both roles speak.


@dataclass(**_KW)
class Hello(Frame):
    """The first frame of a connection (SPEC 3.2)."""

    TYPE = "hello"
    DIRECTION = "client"
    ROLES = ("host", "agent")
    protocol: str
    role: Role
    id: str | None = None
    session_id: str | None = None
    api_key: str | None = None
    join_token: str | None = None
    caller_token: str | None = None
    resume_token: str | None = None
    last_seq: int | None = None
    tools: list[ToolDecl] | None = None


@dataclass(**_KW)
class Welcome(Frame):
    """The broker's answer to a successful hello (SPEC 3.3)."""

    TYPE = "welcome"
    DIRECTION = "broker"
    ROLES = ("host", "agent")
    session_id: str
    connection_id: str
    resume_token: str
    resume_window_ms: int
    heartbeat_ms: int
    server_time_ms: int
    join_token: str | None = None
    ref: str | None = None


@dataclass(**_KW)
class Error(Frame):
    """The error frame (SPEC 2.1). The SDK raises it as a BrokerError subclass."""

    TYPE = "error"
    DIRECTION = "broker"
    ROLES = ("host", "agent")
    code: Code
    message: str
    retryable: bool
    call_id: str | None = None
    handle: str | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class SessionEnd(Frame):
    """Ends the session for everyone (SPEC 3.6)."""

    TYPE = "session.end"
    DIRECTION = "client"
    ROLES = ("host", "agent")
    id: str | None = None


@dataclass(**_KW)
class SessionEnded(Frame):
    """The last frame of every connection of an ended session (SPEC 3.6)."""

    TYPE = "session.ended"
    DIRECTION = "broker"
    ROLES = ("host", "agent")
    reason: EndReason
    ref: str | None = None
    seq: int | None = None


# Host frames.


@dataclass(**_KW)
class ToolsDeclare(Frame):
    TYPE = "tools.declare"
    DIRECTION = "client"
    ROLES = ("host",)
    tools: list[ToolDecl]
    id: str | None = None


@dataclass(**_KW)
class ToolsDeclared(Frame):
    TYPE = "tools.declared"
    DIRECTION = "broker"
    ROLES = ("host",)
    names: list[str]
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolCall(Frame):
    """A call dispatched to the host serving the tool (SPEC 5)."""

    TYPE = "tool_call"
    DIRECTION = "broker"
    ROLES = ("host",)
    call_id: str
    name: str
    arguments: JSONValue
    deferred: bool
    timeout_ms: int
    session_id: str
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolDeferred(Frame):
    """The host's acknowledgement that a call finishes in the background (SPEC 6)."""

    TYPE = "tool_deferred"
    DIRECTION = "client"
    ROLES = ("host",)
    call_id: str
    handle: str
    status_label: str | None = None
    id: str | None = None


@dataclass(**_KW)
class ToolDeferredAck(Frame):
    TYPE = "tool_deferred_ack"
    DIRECTION = "broker"
    ROLES = ("host",)
    call_id: str
    handle: str
    accepted: bool
    reason: DeferAckReason | None = None
    deadline_ms: int | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolProgress(Frame):
    """Silent telemetry about a call (SPEC 7): exactly one of call_id / handle."""

    TYPE = "tool_progress"
    DIRECTION = "client"
    ROLES = ("host",)
    note: str
    call_id: str | None = None
    handle: str | None = None
    id: str | None = None


@dataclass(**_KW)
class ToolPartialResult(Frame):
    """A piece of the eventual answer (SPEC 7); reply narrates it, interaction asks (SPEC 9)."""

    TYPE = "tool_partial_result"
    DIRECTION = "client"
    ROLES = ("host",)
    segment: JSONValue
    call_id: str | None = None
    handle: str | None = None
    reply: bool | None = None
    phase: str | None = None
    interaction: Interaction | None = None
    id: str | None = None


@dataclass(**_KW)
class ToolResult(Frame):
    """Finishes a call (SPEC 5): one of call_id / handle, one of output / error."""

    TYPE = "tool_result"
    DIRECTION = "client"
    ROLES = ("host",)
    call_id: str | None = None
    handle: str | None = None
    output: JSONValue = None
    error: str | None = None
    id: str | None = None


@dataclass(**_KW)
class JobCancel(Frame):
    TYPE = "job.cancel"
    DIRECTION = "client"
    ROLES = ("host", "agent")
    call_id: str | None = None
    handle: str | None = None
    id: str | None = None


@dataclass(**_KW)
class JobCancelResult(Frame):
    TYPE = "job.cancel_result"
    DIRECTION = "broker"
    ROLES = ("host", "agent")
    call_id: str
    result: CancelResult
    handle: str | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolCancel(Frame):
    """Tells the host to stop a job promptly (SPEC 11)."""

    TYPE = "tool_cancel"
    DIRECTION = "broker"
    ROLES = ("host",)
    call_id: str
    reason: CancelReason
    handle: str | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolJobNarration(Frame):
    """The lifecycle of a narration of a job (SPEC 8)."""

    TYPE = "tool_job_narration"
    DIRECTION = "broker"
    ROLES = ("host",)
    call_id: str
    kind: NarrationKind
    state: NarrationState
    attempt: int
    handle: str | None = None
    interaction_id: str | None = None
    response_id: str | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolJobDeliveryFailed(Frame):
    TYPE = "tool_job_delivery_failed"
    DIRECTION = "broker"
    ROLES = ("host",)
    call_id: str
    handle: str
    attempts: int
    reason: DeliveryFailureReason
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolInteractionAnswer(Frame):
    TYPE = "tool_interaction_answer"
    DIRECTION = "broker"
    ROLES = ("host",)
    call_id: str
    interaction_id: str
    text: str
    handle: str | None = None
    option: str | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolInteractionUpdate(Frame):
    TYPE = "tool_interaction_update"
    DIRECTION = "client"
    ROLES = ("host",)
    interaction_id: str
    state: InteractionState
    call_id: str | None = None
    handle: str | None = None
    id: str | None = None


@dataclass(**_KW)
class ToolInteractionUpdateAck(Frame):
    TYPE = "tool_interaction_update_ack"
    DIRECTION = "broker"
    ROLES = ("host",)
    interaction_id: str
    state: InteractionState
    result: InteractionUpdateResult
    call_id: str | None = None
    handle: str | None = None
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ToolDeferredResume(Frame):
    """After a resume: every open deferred job of the slot (SPEC 10)."""

    TYPE = "tool_deferred_resume"
    DIRECTION = "broker"
    ROLES = ("host",)
    jobs: list[ResumedJob]
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class Inject(Frame):
    TYPE = "inject"
    DIRECTION = "client"
    ROLES = ("host",)
    text: str
    speak: bool | None = None
    id: str | None = None


# Agent frames.


@dataclass(**_KW)
class AgentToolCall(Frame):
    TYPE = "agent.tool_call"
    DIRECTION = "client"
    ROLES = ("agent",)
    call_id: str
    conversation_id: str
    name: str
    arguments: JSONValue
    local: bool | None = None
    id: str | None = None


@dataclass(**_KW)
class AgentToolResult(Frame):
    TYPE = "agent.tool_result"
    DIRECTION = "broker"
    ROLES = ("agent",)
    call_id: str
    kind: ToolResultKind
    content: str
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class AgentTurnStart(Frame):
    TYPE = "agent.turn_start"
    DIRECTION = "client"
    ROLES = ("agent",)
    conversation_id: str
    id: str | None = None


@dataclass(**_KW)
class AgentTurnEnd(Frame):
    TYPE = "agent.turn_end"
    DIRECTION = "client"
    ROLES = ("agent",)
    conversation_id: str
    id: str | None = None


@dataclass(**_KW)
class AgentMessage(Frame):
    TYPE = "agent.message"
    DIRECTION = "client"
    ROLES = ("agent",)
    conversation_id: str
    to_conversation_id: str
    text: str
    id: str | None = None


@dataclass(**_KW)
class AgentMessageCommitted(Frame):
    TYPE = "agent.message_committed"
    DIRECTION = "broker"
    ROLES = ("agent",)
    message_id: str
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class AgentPrompt(Frame):
    TYPE = "agent.prompt"
    DIRECTION = "broker"
    ROLES = ("agent",)
    prompt_id: str
    conversation_id: str
    internal: bool
    text: str
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class AgentLocalResult(Frame):
    TYPE = "agent.local_result"
    DIRECTION = "client"
    ROLES = ("agent",)
    call_id: str
    conversation_id: str
    output: JSONValue = None
    error: str | None = None
    id: str | None = None


@dataclass(**_KW)
class AgentLocalCancel(Frame):
    TYPE = "agent.local_cancel"
    DIRECTION = "broker"
    ROLES = ("agent",)
    call_id: str
    conversation_id: str
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class AgentInteractionAnswer(Frame):
    TYPE = "agent.interaction_answer"
    DIRECTION = "client"
    ROLES = ("agent",)
    conversation_id: str
    interaction_id: str
    text: str
    option: str | None = None
    id: str | None = None


@dataclass(**_KW)
class AgentFinal(Frame):
    TYPE = "agent.final"
    DIRECTION = "client"
    ROLES = ("agent",)
    conversation_id: str
    text: str
    id: str | None = None


@dataclass(**_KW)
class ConversationCreate(Frame):
    TYPE = "conversation.create"
    DIRECTION = "client"
    ROLES = ("agent",)
    parent_conversation_id: str
    parent_call_id: str | None = None
    id: str | None = None


@dataclass(**_KW)
class ConversationCreated(Frame):
    TYPE = "conversation.created"
    DIRECTION = "broker"
    ROLES = ("agent",)
    conversation_id: str
    ref: str | None = None
    seq: int | None = None


@dataclass(**_KW)
class ConversationCancel(Frame):
    TYPE = "conversation.cancel"
    DIRECTION = "client"
    ROLES = ("agent",)
    conversation_id: str
    id: str | None = None


#: Every frame class by its wire type.
_FRAME_CLASSES: tuple[type[Frame], ...] = (
    Hello, Welcome, Error, SessionEnd, SessionEnded, ToolsDeclare, ToolsDeclared, ToolCall,
    ToolDeferred, ToolDeferredAck, ToolProgress, ToolPartialResult, ToolResult, JobCancel,
    JobCancelResult, ToolCancel, ToolJobNarration, ToolJobDeliveryFailed,
    ToolInteractionAnswer, ToolInteractionUpdate, ToolInteractionUpdateAck,
    ToolDeferredResume, Inject, AgentToolCall, AgentToolResult, AgentTurnStart, AgentTurnEnd,
    AgentMessage, AgentMessageCommitted, AgentPrompt, AgentLocalResult, AgentLocalCancel,
    AgentInteractionAnswer, AgentFinal, ConversationCreate, ConversationCreated,
    ConversationCancel,
)
FRAME_TYPES: dict[str, type[Frame]] = {cls.TYPE: cls for cls in _FRAME_CLASSES}

_CALL_ID = re.compile(r"call_[a-z2-7]{20}")


def is_broker_call_id(ref: str) -> bool:
    """Whether ref has the form of a broker call id (``call_`` and 20 characters a-z2-7).

    Handles of that form are reserved (SPEC 6), so a string names a call id or a handle
    without ambiguity.
    """
    return _CALL_ID.fullmatch(ref) is not None


def to_wire(value: Any) -> Any:
    """A frame (or part of one) as the JSON value it is on the wire: None members left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        t = getattr(value, "TYPE", "")
        if t:
            out["type"] = t
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is not None:
                out[f.name] = to_wire(v)
        return out
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


def encode(frame: Frame) -> str:
    """The JSON text of a frame."""
    return json.dumps(to_wire(frame), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# Decoding.

_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    h = _hints_cache.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _hints_cache[cls] = h
    return h


def _check(path: str, tp: Any, v: Any) -> Any:
    """Checks v against the annotation tp and converts nested dataclasses."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return v
    if origin is Union or origin is types.UnionType:
        alts = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(alts) == 1:
            return _check(path, alts[0], v)
        for a in alts:
            try:
                return _check(path, a, v)
            except FrameError:
                pass
        raise FrameError(f"field {path} has the wrong type")
    if origin is Literal:
        if not isinstance(v, str):
            raise FrameError(f"field {path} must be a string")
        return v  # a value of a newer protocol revision is passed on as it is
    if origin is list:
        if not isinstance(v, list):
            raise FrameError(f"field {path} must be an array")
        (item,) = typing.get_args(tp)
        return [_check(f"{path}[{i}]", item, x) for i, x in enumerate(v)]
    if origin is dict:
        if not isinstance(v, dict):
            raise FrameError(f"field {path} must be an object")
        return v
    if dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise FrameError(f"field {path} must be an object")
        return _build(tp, v, path + ".")
    if tp is bool:
        if not isinstance(v, bool):
            raise FrameError(f"field {path} must be a boolean")
        return v
    if tp is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise FrameError(f"field {path} must be an integer")
        return v
    if tp is str:
        if not isinstance(v, str):
            raise FrameError(f"field {path} must be a string")
        return v
    return v


def _build(cls: type, obj: dict[str, Any], prefix: str = "") -> Any:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        v = obj.get(f.name)
        if v is None:
            if required:
                raise FrameError(f"{cls.__name__}: missing required field {prefix}{f.name}")
            continue
        kwargs[f.name] = _check(prefix + f.name, hints[f.name], v)
    return cls(**kwargs)


def decode(data: str | bytes) -> Frame:
    """Parses one message of the broker into its frame.

    Raises FrameError for text that is not a JSON object, an unknown ``type``, a missing
    required member or a member of the wrong type. Unknown members are ignored.
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise FrameError(f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise FrameError("a frame is a JSON object")
    t = obj.get("type")
    cls = FRAME_TYPES.get(t) if isinstance(t, str) else None
    if cls is None:
        raise FrameError(f"unknown frame type {t!r}", raw=obj)
    try:
        frame = _build(cls, obj)
    except FrameError as e:
        e.raw = obj
        raise
    return typing.cast(Frame, frame)
