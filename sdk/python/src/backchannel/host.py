"""The high-level host: Host, Tool, Call and Job (as the Go SDK's Connect, Tool, Call, Job)."""

import asyncio
import datetime
import inspect
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable

from . import frames as fr
from .backoff import Backoff
from .client import Client, ConnectionEvent
from .errors import (BackchannelError, CallFinishedError, ClosedError, JobCancelled,
                     UnknownCallError)

__all__ = ["Host", "Tool", "Call", "Job", "InteractionAnswer", "Handler", "ResumeHandler"]

#: A tool's handler: an async function of the Call.
Handler = Callable[["Call"], Awaitable[Any]]
#: Host.connect's on_resume: an async function of the Job and its ResumedJob frame.
ResumeHandler = Callable[["Job", fr.ResumedJob], Awaitable[Any]]


def _duration(v: Any, what: str) -> fr.Duration | None:
    if v is None:
        return None
    if isinstance(v, datetime.timedelta):
        return int(v.total_seconds() * 1000)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError(f"backchannel: Tool.{what} is integer milliseconds, a Go duration string such as '90s', or a timedelta")
    return v


@dataclass
class Tool:
    """A tool the host serves: its declaration (SPEC 4) and the handler of its calls.

    ``parameters`` is a JSON Schema object (default: any object). Durations (``timeout``,
    ``deferred_timeout``) are integer milliseconds, a Go duration string (``"90s"``, ``"2h"``)
    or a ``datetime.timedelta``. ``handler`` is an async function that receives a Call (a plain
    function works too, for answers that need no await).
    """

    name: str
    handler: Handler
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    deferred: bool = False
    deferred_timeout: Any = None
    timeout: Any = None
    requires_permission: bool = False
    expected_duration: str | None = None
    notify_on_complete: bool | None = None

    def decl(self) -> fr.ToolDecl:
        """The declaration sent to the broker."""
        return fr.ToolDecl(name=self.name, description=self.description or self.name, parameters=self.parameters,
                           timeout=_duration(self.timeout, "timeout"), deferred=True if self.deferred else None,
                           deferred_timeout=_duration(self.deferred_timeout, "deferred_timeout"),
                           requires_permission=True if self.requires_permission else None,
                           expected_duration=self.expected_duration,  # type: ignore[arg-type]
                           notify_on_complete=self.notify_on_complete)


@dataclass(frozen=True)
class InteractionAnswer:
    """The answer to a job's interaction (tool_interaction_answer, SPEC 9)."""

    interaction_id: str
    text: str
    option: str | None = None


class Job:
    """A deferred call: the broker's durable job, addressed by its handle (SPEC 6–9).

    It comes from ``await call.defer(...)``, or from the Host's ``on_resume`` for a job an
    earlier process deferred. Every method returns once the broker applied the frame, or raises
    the broker's error (CallFinishedError once the job is over).
    """

    def __init__(self, host: "Host", call_id: str, handle: str, name: str, arguments: Any,
                 status_label: str | None, deadline_ms: int | None) -> None:
        self.host = host
        #: The broker's id of the call.
        self.call_id = call_id
        #: The handle the job was deferred under.
        self.handle = handle
        #: The tool called, and the call's arguments.
        self.name = name
        self.arguments = arguments
        #: The label given with the defer ("" or None: the tool's name is used).
        self.status_label = status_label
        #: When the job times out (epoch milliseconds, and as an aware datetime).
        self.deadline_ms = deadline_ms
        #: Set when the broker cancels the job (tool_cancel): stop the work promptly.
        self.cancelled = asyncio.Event()
        #: The tool_cancel reason once cancelled: timeout, discard, caller_request,
        #: agent_request, host_request or parent_cancelled.
        self.cancel_reason: str | None = None
        #: Whether the job is over for this host (finished through it, or cancelled).
        self.done = False
        self._answers: dict[str, InteractionAnswer] = {}
        self._answer_waiters: dict[str, list[asyncio.Future[InteractionAnswer]]] = {}
        self._on_cancel: list[Callable[[str], Any]] = []
        self._task: asyncio.Future[Any] | None = None  # the on_resume worker, if any

    def __repr__(self) -> str:
        return f"Job(handle={self.handle!r}, call_id={self.call_id!r}, name={self.name!r})"

    @property
    def deadline(self) -> datetime.datetime | None:
        if self.deadline_ms is None:
            return None
        return datetime.datetime.fromtimestamp(self.deadline_ms / 1000, tz=datetime.timezone.utc)

    def on_cancel(self, callback: Callable[[str], Any]) -> None:
        """Calls callback(reason) when the broker cancels the job (at once if it already was)."""
        if self.cancel_reason is not None:
            self.host._emit_callback(callback, self.cancel_reason)
        else:
            self._on_cancel.append(callback)

    async def progress(self, note: str) -> None:
        """A progress note (tool_progress, SPEC 7): added to the agent's context, never spoken."""
        await self.host._client.send_tool_progress(self.handle, note)

    async def milestone(self, segment: Any) -> None:
        """A piece of the answer the broker narrates when the floor is free (tool_partial_result
        with reply: true, SPEC 7–8). segment is any JSON value."""
        await self.host._client.send_tool_partial_result(self.handle, segment, reply=True)

    async def partial(self, segment: Any, phase: str | None = None) -> None:
        """A piece of the answer for the agent's context only (tool_partial_result)."""
        await self.host._client.send_tool_partial_result(self.handle, segment, phase=phase)

    async def ask(self, prompt: str, options: Iterable[str] | None = None, *,
                  interaction_id: str | None = None, timeout: float | None = None) -> InteractionAnswer:
        """Puts a decision to the caller (or the text agent) and returns the answer (SPEC 9).

        The ask is a tool_partial_result with an interaction (id ``interaction_id``, or a fresh
        ``ia_…``); the job's ordinary clock is not involved (it is deferred). A job has at most
        one open interaction: a new ask supersedes the previous one. Raises JobCancelled when
        the job is cancelled while waiting, and asyncio.TimeoutError after ``timeout`` seconds
        (the interaction stays open: close it with update_interaction)."""
        iid = await self.ask_nowait(prompt, options, interaction_id=interaction_id)
        return await self.answer(iid, timeout=timeout)

    async def ask_nowait(self, prompt: str, options: Iterable[str] | None = None, *,
                         interaction_id: str | None = None) -> str:
        """Sends the ask of ``ask`` and returns its interaction id without waiting for the answer
        (get it with ``answer``)."""
        iid = interaction_id or "ia_" + secrets.token_hex(10)
        ia = fr.Interaction(prompt=prompt, id=iid, options=list(options) if options is not None else None)
        await self.host._client.send_tool_partial_result(self.handle, prompt, interaction=ia)
        return iid

    async def answer(self, interaction_id: str, *, timeout: float | None = None) -> InteractionAnswer:
        """The answer to the interaction ``interaction_id`` (one already received, or the next)."""
        got = self._answers.pop(interaction_id, None)
        if got is not None:
            return got
        if self.cancel_reason is not None:
            raise JobCancelled(self.cancel_reason, self.call_id, self.handle)
        fut: asyncio.Future[InteractionAnswer] = asyncio.get_running_loop().create_future()
        self._answer_waiters.setdefault(interaction_id, []).append(fut)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            ws = self._answer_waiters.get(interaction_id, [])
            if fut in ws:
                ws.remove(fut)

    async def update_interaction(self, interaction_id: str, state: str) -> str:
        """Closes an open interaction as ``resolved``, ``cancelled`` or ``superseded``
        (tool_interaction_update, SPEC 9); returns ``applied``, ``already_closed`` or
        ``unknown_interaction``."""
        ack = await self.host._client.send_tool_interaction_update(self.handle, interaction_id, state)
        return ack.result

    async def result(self, output: Any = None) -> None:
        """Completes the job with output, any JSON value (None is sent as "")."""
        await self._finish(output=output)

    async def fail(self, message: str) -> None:
        """Completes the job as failed with message."""
        await self._finish(error=message or "tool failed")

    async def _finish(self, output: Any = None, error: str | None = None) -> None:
        try:
            await self.host._client.send_tool_result(self.handle, output=output, error=error)
        except (CallFinishedError, UnknownCallError):
            self.host._forget(self)
            raise
        self.host._forget(self)

    # Routing from the host.

    def _deliver(self, a: InteractionAnswer) -> None:
        ws = self._answer_waiters.get(a.interaction_id)
        while ws:
            fut = ws.pop(0)
            if not fut.done():
                fut.set_result(a)
                return
        self._answers[a.interaction_id] = a

    def _cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        self.done = True
        self.cancelled.set()
        for ws in self._answer_waiters.values():
            for fut in ws:
                if not fut.done():
                    fut.set_exception(JobCancelled(reason, self.call_id, self.handle))
        for cb in self._on_cancel:
            self.host._emit_callback(cb, reason)
        self._on_cancel.clear()


class Call:
    """One call of a tool, as the broker dispatched it (tool_call, SPEC 5).

    The handler answers by returning (the value is the output; an exception is the error), or
    defers the call with ``await call.defer(handle, status_label)``.
    """

    def __init__(self, host: "Host", f: fr.ToolCall) -> None:
        self.host = host
        #: The broker's id of the call ("call_" and 20 characters a-z2-7).
        self.call_id = f.call_id
        #: The tool called.
        self.name = f.name
        #: The arguments, already checked against the tool's parameters (a JSON value).
        self.arguments = f.arguments
        #: Whether the tool was declared deferred (so that defer may be accepted).
        self.deferrable = f.deferred
        #: The call's ordinary timeout in seconds: progress re-arms it.
        self.timeout = f.timeout_ms / 1000
        #: The session the call belongs to.
        self.session_id = f.session_id
        #: Set when the broker cancels the call (tool_cancel).
        self.cancelled = asyncio.Event()
        #: The tool_cancel reason once cancelled.
        self.cancel_reason: str | None = None
        #: The Job once a defer was accepted.
        self.job: Job | None = None
        self._task: asyncio.Future[Any] | None = None
        self._resumed: tuple[Job, fr.ResumedJob] | None = None

    def __repr__(self) -> str:
        return f"Call(name={self.name!r}, call_id={self.call_id!r})"

    async def defer(self, handle: str, status_label: str | None = None) -> Job:
        """Defers the call under handle (tool_deferred, SPEC 6): a name unique in the tenant and
        never reusable. The agent is told at once that the job runs in the background under
        status_label (None: the tool's name). Returns the Job; raises DeferRejected (with
        ``.reason``) when the broker refuses — the call then stays pending on its ordinary
        timeout, so the handler may still answer it or defer it under another handle.
        Deferring again with the same handle returns the same Job."""
        ack = await self.host._client.send_tool_deferred(self.call_id, handle, status_label)
        job = self.host._jobs.get(self.call_id)
        if job is None:
            job = Job(self.host, self.call_id, handle, self.name, self.arguments, status_label, ack.deadline_ms)
            self.host._register(job)
        self.job = job
        return job

    async def progress(self, note: str) -> None:
        """tool_progress before an answer: re-arms the call's ordinary timeout (SPEC 7)."""
        await self.host._client.send_tool_progress(self.job.handle if self.job else self.call_id, note)


class Host:
    """A host connection (SPEC 1): declares tools, runs their handlers, carries their jobs.

    Connect with ``await Host.connect(url, api_key=... | session_id=..., join_token=...,
    tools=[Tool(...)], state_file=...)``. Each tool_call runs the tool's handler in a task of
    its own. The host reconnects by itself when the transport drops and resumes its slot (see
    the README: "Reconnects and the state file").
    """

    def __init__(self, url: str, *, api_key: str | None = None, session_id: str | None = None,
                 join_token: str | None = None, tools: Iterable[Tool] = (), state_file: str | None = None,
                 on_resume: ResumeHandler | None = None, backoff: Backoff | None = None,
                 logger: logging.Logger | None = None) -> None:
        tools = list(tools)
        _check_tools(tools)
        self._tools = {t.name: t for t in tools}
        self._on_resume = on_resume
        self.log = logger or logging.getLogger("backchannel")
        self._client = Client(url, role="host", api_key=api_key, session_id=session_id, join_token=join_token,
                              tools=[t.decl() for t in tools] if tools else None, state_file=state_file,
                              backoff=backoff, logger=self.log)
        self._calls: dict[str, Call] = {}
        self._jobs: dict[str, Job] = {}
        self._handles: dict[str, Job] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        c = self._client
        c.on_tool_call(self._on_tool_call)
        c.on_tool_cancel(self._on_tool_cancel)
        c.on_tool_interaction_answer(self._on_answer)
        c.on_tool_deferred_resume(self._on_deferred_resume)
        c.on_connection(self._on_connection)

    @classmethod
    async def connect(cls, url: str, *, api_key: str | None = None, session_id: str | None = None,
                      join_token: str | None = None, tools: Iterable[Tool] = (), state_file: str | None = None,
                      on_resume: ResumeHandler | None = None, backoff: Backoff | None = None,
                      logger: logging.Logger | None = None) -> "Host":
        """Connects and returns the Host once its tools are declared.

        ``api_key`` alone creates a session (``join_token`` then tells its join token); with
        ``session_id`` it attaches to that session, as ``session_id`` + ``join_token`` does.
        With ``state_file`` the slot is kept on disk: when the file exists, connect resumes that
        slot instead (the options that name a session are then not needed), the broker replays
        what the previous process missed, and the jobs it had deferred come to ``on_resume``.
        """
        h = cls(url, api_key=api_key, session_id=session_id, join_token=join_token, tools=tools,
                state_file=state_file, on_resume=on_resume, backoff=backoff, logger=logger)
        await h._client.connect()
        return h

    # Properties.

    @property
    def client(self) -> Client:
        """The frame-level Client under this host (for frames the Host has no method for)."""
        return self._client

    @property
    def session_id(self) -> str:
        return self._client.session_id or ""

    @property
    def join_token(self) -> str | None:
        """The session's join token: known when this host created the session, attached with
        it, or resumed from a state file that holds it."""
        return self._client.join_token

    @property
    def jobs(self) -> dict[str, Job]:
        """The open deferred jobs this host knows, by handle."""
        return dict(self._handles)

    @property
    def closed(self) -> bool:
        return self._client.stopped

    @property
    def error(self) -> BaseException | None:
        """None while the host runs, then why it stopped: ClosedError after close(),
        SessionEndedError after the session ended, or the error of the resume that failed."""
        return self._client.error

    async def wait_closed(self) -> BaseException | None:
        """Waits until the host has stopped for good (close(), the session's end, a resume that
        failed for good) and returns ``error``."""
        return await self._client.wait_closed()

    async def __aenter__(self) -> "Host":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def on(self, frame_type: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Calls handler(frame) for every broker frame of that type (``"*"``: all) that answers
        none of the host's requests — tool_job_narration, tool_job_delivery_failed, session.ended,
        error, … (tool_call, tool_cancel, tool_interaction_answer and tool_deferred_resume too,
        after the Host acted on them) — or, with ``"connection"``, every ConnectionEvent.
        Returns a function that removes the handler."""
        return self._client.on(frame_type, handler)

    # Requests.

    async def declare(self, tools: Iterable[Tool]) -> list[str]:
        """Replaces the tool set (tools.declare, SPEC 4); returns the declared names. A refused
        declaration raises BadFrameError (naming the tool and field) and changes nothing."""
        tools = list(tools)
        _check_tools(tools)
        ans = await self._client.send_tools_declare([t.decl() for t in tools])
        self._tools = {t.name: t for t in tools}
        return ans.names

    async def cancel_job(self, ref: str) -> str:
        """job.cancel of a job of the session by handle or call id (SPEC 11): its host gets
        tool_cancel ``host_request``. Returns ``cancelled``, ``already_done``,
        ``already_canceled`` or ``unknown_call``."""
        return (await self._client.send_job_cancel(ref)).result

    async def inject(self, text: str, speak: bool = True) -> None:
        """Asks the voice agent to take a turn about text at the next free floor (SPEC 8)."""
        await self._client.send_inject(text, speak)

    async def end(self) -> None:
        """Ends the session for everyone (session.end): open jobs are cancelled (discard) and
        every connection gets session.ended; returns once it has ended."""
        await self._client.send_session_end()
        await self._stop_tasks()

    async def close(self) -> None:
        """Closes the connection; the slot stays resumable for the resume window (with a state
        file, a new process resumes it). Running handlers and on_resume workers are cancelled."""
        await self._client.close()
        await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # Routing.

    def _emit_callback(self, cb: Callable[[Any], Any], arg: Any) -> None:
        try:
            r = cb(arg)
        except Exception:
            self.log.exception("backchannel: callback failed")
            return
        if asyncio.iscoroutine(r) or isinstance(r, asyncio.Future):
            self._spawn(r, "callback")

    def _spawn(self, coro: Any, what: str) -> "asyncio.Future[Any]":
        t: asyncio.Future[Any] = asyncio.ensure_future(coro)
        self._tasks.add(t)

        def done(t: "asyncio.Future[Any]") -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self.log.error("backchannel: %s failed", what, exc_info=t.exception())
        t.add_done_callback(done)
        return t

    def _register(self, job: Job) -> None:
        self._jobs[job.call_id] = job
        self._handles[job.handle] = job

    def _forget(self, job: Job) -> None:
        job.done = True
        if self._jobs.get(job.call_id) is job:
            del self._jobs[job.call_id]
        if self._handles.get(job.handle) is job:
            del self._handles[job.handle]

    def _on_connection(self, ev: ConnectionEvent) -> None:
        if ev.kind == "stopped":
            for t in list(self._tasks):
                t.cancel()

    def _on_tool_call(self, f: fr.ToolCall) -> None:
        if self._client.stopped or f.call_id in self._calls or f.call_id in self._jobs:
            return
        call = Call(self, f)
        self._calls[f.call_id] = call
        call._task = self._spawn(self._run_call(call), f"call {f.call_id} of {f.name}")

    async def _run_call(self, call: Call) -> None:
        tool = self._tools.get(call.name)
        out: Any = None
        err: BaseException | None = None
        cancelled = False
        try:
            if tool is None:
                raise BackchannelError(f"tool {call.name} has no handler in this host")
            out = tool.handler(call)
            if inspect.isawaitable(out):  # a plain function may answer at once too
                out = await out
        except asyncio.CancelledError:
            cancelled = True
        except Exception as e:
            err = e
            if not call.cancelled.is_set():
                self.log.warning("backchannel: the handler of %s failed for call %s: %r", call.name, call.call_id, e)
        finally:
            self._calls.pop(call.call_id, None)
        if cancelled or call.cancelled.is_set() or self._client.stopped:
            if cancelled and not call.cancelled.is_set() and not self._client.stopped:
                raise asyncio.CancelledError
            return
        job = call.job
        if job is None and call._resumed is not None:
            # A call replayed to a restarted process whose handler did not take its deferred
            # job over: the job goes to on_resume.
            self._resume_job(*call._resumed)
            return
        try:
            if job is not None:
                await self._finish_job(job, out, err)
            elif err is not None:
                await self._client.send_tool_result(call.call_id, error=str(err) or type(err).__name__)
            else:
                await self._client.send_tool_result(call.call_id, output=out)
        except (CallFinishedError, UnknownCallError, ClosedError) as e:
            self.log.info("backchannel: the result of call %s was not taken: %s", call.call_id, e)

    async def _finish_job(self, job: Job, out: Any, err: BaseException | None) -> None:
        """What a handler's (or on_resume's) return means for its deferred job: a value
        completes it, an exception fails it, None leaves it open."""
        if job.done:
            return
        if err is not None:
            await job.fail(str(err) or type(err).__name__)
        elif out is not None:
            await job.result(out)

    def _on_tool_cancel(self, f: fr.ToolCancel) -> None:
        call = self._calls.get(f.call_id)
        if call is not None:
            call.cancel_reason = f.reason
            call.cancelled.set()
            if call._task is not None:
                call._task.cancel()
        job = self._jobs.get(f.call_id)
        if job is not None:
            self._forget(job)
            job._cancel(f.reason)
            if job._task is not None:
                job._task.cancel()

    def _on_answer(self, f: fr.ToolInteractionAnswer) -> None:
        job = self._jobs.get(f.call_id)
        if job is None:
            self.log.warning("backchannel: interaction answer for a job this host does not know: %s", f.call_id)
            return
        job._deliver(InteractionAnswer(interaction_id=f.interaction_id, text=f.text, option=f.option))

    def _on_deferred_resume(self, f: fr.ToolDeferredResume) -> None:
        listed = set()
        news = []
        for rj in f.jobs:
            listed.add(rj.call_id)
            if rj.call_id in self._jobs:
                continue
            job = Job(self, rj.call_id, rj.handle, rj.name, rj.arguments, rj.status_label or None, rj.deadline_ms)
            self._register(job)
            call = self._calls.get(rj.call_id)
            if call is not None:
                # After a restart the replayed tool_call started the handler again: it takes the
                # job over by deferring it again (same handle: accepted again); if it does not,
                # the job goes to on_resume when it returns. One worker either way.
                call._resumed = (job, rj)
                continue
            news.append((job, rj))
        for cid, job in list(self._jobs.items()):
            if cid not in listed:
                self._forget(job)
        for job, rj in news:
            self._resume_job(job, rj)

    def _resume_job(self, job: Job, info: fr.ResumedJob) -> None:
        if self._on_resume is None:
            self.log.warning("backchannel: job %s (%s) was resumed but on_resume is not set; it times out unless finished",
                             job.handle, job.call_id)
            return
        job._task = self._spawn(self._run_resume(job, info), f"on_resume of job {job.handle}")

    async def _run_resume(self, job: Job, info: fr.ResumedJob) -> None:
        assert self._on_resume is not None
        out: Any = None
        err: BaseException | None = None
        try:
            out = self._on_resume(job, info)
            if inspect.isawaitable(out):
                out = await out
        except asyncio.CancelledError:
            if job.cancelled.is_set() or self._client.stopped:
                return
            raise
        except Exception as e:
            err = e
        if job.cancelled.is_set() or self._client.stopped:
            return
        try:
            await self._finish_job(job, out, err)
        except (CallFinishedError, UnknownCallError, ClosedError) as e:
            self.log.info("backchannel: the result of job %s was not taken: %s", job.handle, e)


def _check_tools(tools: list[Tool]) -> None:
    seen = set()
    for i, t in enumerate(tools):
        if not isinstance(t, Tool):
            raise TypeError(f"backchannel: tools[{i}] is not a Tool")
        if not t.name:
            raise ValueError(f"backchannel: tools[{i}] has no name")
        if not callable(t.handler):
            raise ValueError(f"backchannel: tool {t.name!r} has no handler")
        if t.name in seen:
            raise ValueError(f"backchannel: tool {t.name!r} is listed twice")
        seen.add(t.name)
