"""Backchannel's Python SDK: hosts that run (and defer) tools, and text agents.

- Host, Tool, Call, Job: a host that declares tools, answers calls, and defers slow ones as
  background jobs with progress, milestones, decisions and a result (as the Go SDK).
- Agent, Conversation, ToolResult: a text agent with call / wait / cancel / status, prompts and
  child conversations (SPEC 13).
- Client: the frame-level connection under both, with methods named after the frames
  (send_tool_deferred, send_tool_progress, …) and handlers for the broker's frames.
- backchannel.frames: every frame as a dataclass; backchannel.errors: the exceptions.

See sdk/python/README.md.
"""

from . import frames
from .agent import Agent, Conversation, ToolResult, parse_result
from .backoff import Backoff
from .client import BARRIER_CALL_ID, Client, ConnectionEvent, endpoint_url
from .errors import (ERRORS_BY_CODE, BackchannelError, BadFrameError, BrokerError,
                     CallFinishedError, CallNotPendingError, ClosedError, ConnectError,
                     DeferRejected, DeferRejectedError, ForbiddenError, FrameError,
                     InjectRejectedError, InternalError, JobCancelled, LimitExceededError,
                     NotFoundError, ProtocolError, ResumeExpiredError, ResumeInvalidError,
                     SessionEndedError, UnauthorizedError, UnconfirmedError, UnknownCallError,
                     UnknownFrameError)
from .frames import Interaction, ResumedJob, ToolDecl
from .host import Call, Host, InteractionAnswer, Job, Tool

__version__ = "0.1.0"

__all__ = [
    "Host", "Tool", "Call", "Job", "InteractionAnswer", "Agent", "Conversation", "ToolResult",
    "parse_result", "Client", "ConnectionEvent", "Backoff", "endpoint_url", "BARRIER_CALL_ID",
    "frames", "ToolDecl", "Interaction", "ResumedJob",
    "BackchannelError", "BrokerError", "BadFrameError", "UnknownFrameError", "UnauthorizedError",
    "ForbiddenError", "NotFoundError", "LimitExceededError", "UnknownCallError",
    "CallNotPendingError", "CallFinishedError", "InjectRejectedError", "SessionEndedError",
    "ResumeExpiredError", "ResumeInvalidError", "InternalError", "DeferRejected",
    "DeferRejectedError", "JobCancelled", "ClosedError", "UnconfirmedError", "ConnectError",
    "ProtocolError", "FrameError", "ERRORS_BY_CODE",
]
