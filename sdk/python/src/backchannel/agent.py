"""A text agent over the agent role (SPEC 13): call, wait, cancel, status, prompts, children."""

import asyncio
import itertools
import json
import logging
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from . import frames as fr
from .backoff import Backoff
from .client import Client, ConnectionEvent

__all__ = ["Agent", "Conversation", "ToolResult", "parse_result", "HEADER_NAMES"]

#: The header names of the result text format, in the order they appear (SPEC 13).
HEADER_NAMES = ("internal", "wait_outcome", "wait_reason", "wait_mode", "original_tool_call_id", "error",
                "tool_call_id", "duration_seconds", "input_available", "timed_out", "advice", "pending_prompts")

_HEADER = re.compile(r"([a-z_]+): (.*)", re.S)
_ESCAPE = re.compile(r"\\(\\|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4})")


def _unescape(v: str) -> str:
    def rep(m: re.Match[str]) -> str:
        e = m.group(1)
        return {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}.get(e) or chr(int(e[1:], 16))
    return _ESCAPE.sub(rep, v)


@dataclass(frozen=True)
class ToolResult:
    """An agent.tool_result, read (SPEC 13's result text format).

    ``kind`` is ``result``, ``background_placeholder`` or ``error``; ``content`` the text as
    the broker sent it (what a harness hands its model); ``headers`` the header lines
    (unescaped) and ``body`` the text after them (None when there is none).
    """

    call_id: str
    kind: str
    content: str
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None

    @property
    def is_error(self) -> bool:
        """Whether the call (or the built-in) failed: the content has an ``error`` header."""
        return self.kind == "error"

    @property
    def error(self) -> str | None:
        """The ``error`` header: the failure's message (``Tool call canceled``, …)."""
        return self.headers.get("error")

    @property
    def is_background(self) -> bool:
        """The call went to the background: wait for it with ``wait(call_id)``."""
        return self.kind == "background_placeholder"

    @property
    def interrupted(self) -> bool:
        """A wait returned early because activating input is pending (nothing was consumed)."""
        return self.headers.get("wait_outcome") == "interrupted"

    @property
    def input_available(self) -> bool:
        """A timed wait ended because input arrived."""
        return self.headers.get("input_available") == "true"

    @property
    def timed_out(self) -> bool:
        """A timed wait ended at its deadline."""
        return self.headers.get("timed_out") == "true"

    @property
    def original_tool_call_id(self) -> str | None:
        """The call a bare wait consumed."""
        return self.headers.get("original_tool_call_id")

    @property
    def duration_seconds(self) -> int | None:
        v = self.headers.get("duration_seconds")
        return int(v) if v is not None and v.isdigit() else None

    def json(self) -> Any:
        """The body as a JSON value (a string body that is not JSON is returned as it is)."""
        if self.body is None:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body


def parse_result(f: fr.AgentToolResult) -> ToolResult:
    """Reads the headers and body of an agent.tool_result's content."""
    lines = f.content.split("\n")
    headers: dict[str, str] = {}
    body: str | None = None
    for i, line in enumerate(lines):
        if line == "" and headers:
            body = "\n".join(lines[i + 1:])
            break
        m = _HEADER.fullmatch(line)
        if m is None or m.group(1) not in HEADER_NAMES:
            body = "\n".join(lines[i:]) if headers else f.content
            break
        headers[m.group(1)] = _unescape(m.group(2))
    return ToolResult(call_id=f.call_id, kind=f.kind, content=f.content, headers=headers, body=body)


_END = object()


class Conversation:
    """A conversation of the text agent (``root``, or a child made with create_child).

    Results of ``call`` and the built-ins are ToolResult values, never exceptions: a failed tool
    or wait is a result with ``is_error`` (its text is what the model should read). Exceptions
    are for the connection and for frames the broker refuses (BrokerError subclasses).
    """

    def __init__(self, agent: "Agent", conversation_id: str) -> None:
        self.agent = agent
        #: The conversation's id: ``root`` or ``conv_N_…``.
        self.id = conversation_id

    def __repr__(self) -> str:
        return f"Conversation({self.id!r})"

    async def call(self, name: str, arguments: Any = None, *, call_id: str | None = None,
                   local: bool = False) -> ToolResult:
        """Calls a tool (agent.tool_call) and returns its answer: the result, an error result,
        or — when it runs longer than the broker's ``--background-after`` (2 s) or its host
        defers it — the background placeholder (``is_background``); then ``wait(call_id)``
        gives the result. ``call_id`` (default: a fresh one) is the agent's own id, unique among
        all the agent's calls. ``local=True`` is a call the harness runs itself: report its
        outcome with ``local_result``."""
        cid = call_id or self.agent._new_call_id(name)
        return await self.agent._call(self.id, cid, name, {} if arguments is None else arguments, local)

    async def wait(self, call_id: str | None = None, *, timeout_minutes: int | None = None) -> ToolResult:
        """The built-in ``wait``: ``wait(call_id)`` returns that call's result once (blocking
        while it runs); ``wait()`` the oldest unconsumed completed background result of this
        conversation (header ``original_tool_call_id``), or the next one; ``wait(timeout_minutes=N)``
        waits for activating input (``input_available``) or N minutes (``timed_out``; N is
        clamped to 5…1440 by the broker). A wait interrupted by activating input returns
        ``interrupted`` and consumes nothing: read the prompts, then wait again."""
        if call_id is not None:
            args: dict[str, Any] = {"tool_call_id": call_id}
        elif timeout_minutes is not None:
            args = {"timeout_minutes": timeout_minutes}
        else:
            args = {}
        return await self.call("wait", args)

    async def wait_result(self, call_id: str) -> ToolResult:
        """``wait(call_id)`` again after every interruption, until the call's result is
        consumed. The prompts that interrupted it stay in ``prompts()``."""
        while True:
            r = await self.wait(call_id)
            if not r.interrupted:
                return r

    async def cancel(self, call_id: str) -> ToolResult:
        """The built-in ``cancel``: body ``Tool cancellation requested``, or an error result
        (``Tool call already canceled``, ``Tool call is already done``, ``Unknown tool call id``,
        …). The cancelled call completes with ``error: Tool call canceled``."""
        return await self.call("cancel", {"tool_call_id": call_id})

    async def status(self, state: str, title: str) -> ToolResult:
        """The built-in ``status``: ``working``, ``waiting``, ``blocked`` or ``done`` with a
        one-line title; a watching parent gets it as a prompt."""
        return await self.call("status", {"state": state, "title": title})

    async def turn_start(self) -> None:
        """agent.turn_start: prompts wait for the end of the turn."""
        await self.agent.client.send_agent_turn_start(self.id)

    async def turn_end(self) -> None:
        """agent.turn_end: the conversation is idle; queued prompts are delivered."""
        await self.agent.client.send_agent_turn_end(self.id)

    async def message(self, to_conversation_id: str, text: str) -> str:
        """agent.message to another conversation; returns the message id once committed."""
        return (await self.agent.client.send_agent_message(self.id, to_conversation_id, text)).message_id

    async def final(self, text: str) -> None:
        """agent.final: this (child) conversation's final response, for its watching parent."""
        await self.agent.client.send_agent_final(self.id, text)

    async def answer_interaction(self, interaction_id: str, text: str, option: str | None = None) -> None:
        """agent.interaction_answer to an interaction prompt of one of this conversation's calls."""
        await self.agent.client.send_agent_interaction_answer(self.id, interaction_id, text, option)

    async def local_result(self, call_id: str, output: Any = None, error: str | None = None) -> None:
        """agent.local_result: the outcome of a ``local`` call of this conversation."""
        await self.agent.client.send_agent_local_result(call_id, self.id, output, error)

    async def create_child(self, parent_call_id: str | None = None) -> "Conversation":
        """conversation.create: a child conversation (a sub-agent) that this one watches; with
        ``parent_call_id`` (the agent id of a call of this conversation, typically a ``local``
        one) the child's calls are cancelled when that call is."""
        created = await self.agent.client.send_conversation_create(self.id, parent_call_id)
        return self.agent.conversation(created.conversation_id)

    async def cancel_conversation(self) -> None:
        """conversation.cancel: cancels this conversation's open calls and its descendants'."""
        await self.agent.client.send_conversation_cancel(self.id)

    def prompts(self) -> AsyncIterator[fr.AgentPrompt]:
        """The prompts of this conversation (agent.prompt frames), in order, as an async
        iterator that ends when the agent stops. Prompts received before iterating are kept."""
        return self.agent._iter_prompts(self.id)

    async def next_prompt(self, timeout: float | None = None) -> fr.AgentPrompt:
        """The next prompt of this conversation (asyncio.TimeoutError after timeout seconds)."""
        q = self.agent._queue(self.id)
        item = await asyncio.wait_for(q.get(), timeout)
        if item is _END:
            q.put_nowait(_END)
            raise self.agent.client.error or EOFError("backchannel: the agent stopped")
        return item  # type: ignore[no-any-return]


class Agent(Conversation):
    """A text agent (``role: agent``) for a Python agent harness; it is the ``root``
    conversation, and makes children with create_child.

    Connect with ``await Agent.connect(url, api_key=... | session_id=..., join_token=...)``.
    Like a Host it reconnects and resumes by itself (and with ``state_file`` survives a
    restart: results and prompts sent meanwhile are replayed).
    """

    def __init__(self, url: str, *, api_key: str | None = None, session_id: str | None = None,
                 join_token: str | None = None, state_file: str | None = None,
                 backoff: Backoff | None = None, logger: logging.Logger | None = None) -> None:
        super().__init__(self, "root")
        self.log = logger or logging.getLogger("backchannel")
        self.client = Client(url, role="agent", api_key=api_key, session_id=session_id, join_token=join_token,
                             state_file=state_file, backoff=backoff, logger=self.log)
        self._prefix = secrets.token_hex(2)
        self._n = itertools.count(1)
        self._results: dict[str, asyncio.Future[ToolResult]] = {}
        self._queues: dict[str, asyncio.Queue[Any]] = {}
        self._local_cancel: list[Callable[[fr.AgentLocalCancel], Any]] = []
        self.client.on("agent.tool_result", self._on_result)
        self.client.on("agent.prompt", self._on_prompt)
        self.client.on("agent.local_cancel", self._on_local_cancel)
        self.client.on_connection(self._on_connection)

    @classmethod
    async def connect(cls, url: str, *, api_key: str | None = None, session_id: str | None = None,
                      join_token: str | None = None, state_file: str | None = None,
                      backoff: Backoff | None = None, logger: logging.Logger | None = None) -> "Agent":
        """Connects as the session's text agent. ``api_key`` alone creates a session; with
        ``session_id`` (or ``session_id`` + ``join_token``) it attaches to one."""
        a = cls(url, api_key=api_key, session_id=session_id, join_token=join_token, state_file=state_file,
                backoff=backoff, logger=logger)
        await a.client.connect()
        return a

    @property
    def session_id(self) -> str:
        return self.client.session_id or ""

    @property
    def join_token(self) -> str | None:
        return self.client.join_token

    def conversation(self, conversation_id: str) -> Conversation:
        """The Conversation object of a conversation id (``root`` is the agent itself)."""
        return self if conversation_id == "root" else Conversation(self, conversation_id)

    def on_local_cancel(self, callback: Callable[[fr.AgentLocalCancel], Any]) -> None:
        """Calls callback(frame) when the broker cancels one of the agent's local calls."""
        self._local_cancel.append(callback)

    async def end(self) -> None:
        """Ends the session for everyone (session.end)."""
        await self.client.send_session_end()

    async def close(self) -> None:
        """Closes the connection; the slot stays resumable for the resume window."""
        await self.client.close()

    async def wait_closed(self) -> BaseException | None:
        return await self.client.wait_closed()

    async def __aenter__(self) -> "Agent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # Internals.

    def _new_call_id(self, name: str) -> str:
        return f"{name}-{self._prefix}-{next(self._n)}"

    async def _call(self, conversation_id: str, call_id: str, name: str, arguments: Any, local: bool) -> ToolResult:
        if call_id in self._results:
            raise ValueError(f"backchannel: call id {call_id!r} is already in use by this agent")
        fut: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._results[call_id] = fut
        try:
            await self.client.send_agent_tool_call(call_id, conversation_id, name, arguments, local)
            return await asyncio.shield(fut)
        finally:
            if self._results.get(call_id) is fut:
                del self._results[call_id]

    def _on_result(self, f: fr.AgentToolResult) -> None:
        fut = self._results.get(f.call_id)
        if fut is None or fut.done():
            self.log.debug("backchannel: agent.tool_result for %s that nothing waits for", f.call_id)
            return
        fut.set_result(parse_result(f))

    def _queue(self, conversation_id: str) -> "asyncio.Queue[Any]":
        q = self._queues.get(conversation_id)
        if q is None:
            q = asyncio.Queue()
            if self.client.stopped:
                q.put_nowait(_END)
            self._queues[conversation_id] = q
        return q

    def _on_prompt(self, f: fr.AgentPrompt) -> None:
        self._queue(f.conversation_id).put_nowait(f)

    async def _iter_prompts(self, conversation_id: str) -> AsyncIterator[fr.AgentPrompt]:
        q = self._queue(conversation_id)
        while True:
            item = await q.get()
            if item is _END:
                q.put_nowait(_END)
                return
            yield item

    def _on_local_cancel(self, f: fr.AgentLocalCancel) -> None:
        for cb in self._local_cancel:
            r = cb(f)
            if asyncio.iscoroutine(r):
                self.client._spawn(r, "on_local_cancel")

    def _on_connection(self, ev: ConnectionEvent) -> None:
        if ev.kind != "stopped":
            return
        for q in self._queues.values():
            q.put_nowait(_END)
        for fut in self._results.values():
            if not fut.done():
                fut.set_exception(ev.error or EOFError("backchannel: the agent stopped"))
