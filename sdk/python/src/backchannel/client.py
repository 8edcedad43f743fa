"""The frame-level client: one WebSocket slot of a session, with requests named after frames.

A Client dials ``/v1/ws``, sends ``hello`` and keeps the slot: it reconnects with backoff and
jitter when the transport drops, resumes with the latest resume token and ``last_seq``, drops
replayed frames it has already processed (by ``seq``), and settles the requests the drop left
open. Host and Agent are built on it; it is public for code that wants the frames themselves.

How a request knows it was applied: frames the broker answers (tool_deferred,
tool_interaction_update, job.cancel, tools.declare, agent.message, conversation.create) resolve
with the answer whose ``ref`` is the request's ``id``. Frames it answers only when they fail
(progress, partial results, results, injects, agent tool calls and turns) are followed by a
*barrier* — ``job.cancel`` of the impossible call id ``call_00000000000000000000``, answered
``unknown_call`` and changing nothing — and resolve once the barrier is answered with no error
before it: the broker applies a connection's frames in order.
"""

import asyncio
import inspect
import itertools
import logging
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from . import frames as fr
from ._state import SavedState, StateFile, load_state, remove_state
from .backoff import Backoff
from .errors import (BackchannelError, BrokerError, CallFinishedError, ClosedError,
                     ConnectError, DeferRejected, FrameError, LimitExceededError,
                     NotFoundError, ProtocolError, ResumeExpiredError, ResumeInvalidError,
                     SessionEndedError, UnconfirmedError, broker_error)

__all__ = ["Client", "ConnectionEvent", "endpoint_url", "BARRIER_CALL_ID"]

#: The call id of barriers: no broker call id has the character 0.
BARRIER_CALL_ID = "call_00000000000000000000"

_DIAL_TIMEOUT = 10.0
_WRITE_TIMEOUT = 10.0
_READ_LIMIT = 64 << 20
_MAX_FRAME_BYTES = 1 << 20
# Client-side pacing keeps a connection under the broker's rate limit (SPEC 2: 100 frames/s
# sustained, burst 200), so that no frame is ever refused for rate.
_PACE_RATE = 80.0
_PACE_BURST = 100.0
# How many cancelled call ids and handles a client remembers.
_CANCELLED_KEPT = 10000

# How a request's success is known.
_ANSWERED, _SILENT = "answered", "silent"
# What to do with a silent request whose outcome a drop left unknown.
_NEVER, _ALWAYS, _RESULT = "never", "always", "result"

Handler = Callable[[Any], Any]


def endpoint_url(raw: str) -> str:
    """The WebSocket endpoint of a broker address: ``ws://``, ``wss://``, ``http://`` or
    ``https://`` URL; one without a path gets ``/v1/ws`` (http becomes ws, https wss)."""
    if not raw:
        raise ValueError("backchannel: url is empty: set it to the broker's ws://HOST:PORT/v1/ws")
    u = urllib.parse.urlsplit(raw)
    scheme = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}.get(u.scheme)
    if scheme is None:
        raise ValueError(f"backchannel: url {raw!r} must start with ws://, wss://, http:// or https://")
    if not u.netloc:
        raise ValueError(f"backchannel: url {raw!r} has no host")
    path = u.path if u.path not in ("", "/") else "/v1/ws"
    return urllib.parse.urlunsplit((scheme, u.netloc, path, u.query, ""))


@dataclass
class ConnectionEvent:
    """What ``on_connection`` handlers receive.

    ``kind``: ``connected`` (the first welcome), ``dropped`` (the transport dropped; ``error``
    says why; the client reconnects by itself), ``resumed`` (the slot was resumed on a new
    connection) or ``stopped`` (for good; ``error`` is the client's ``error``).
    """

    kind: str
    error: BaseException | None = None


class _Request:
    __slots__ = ("id", "type", "data", "kind", "rule", "on_reply", "barrier", "covers", "written",
                 "gen", "order", "resent", "done", "future")

    def __init__(self, rid: str, ftype: str, data: str, kind: str, rule: str,
                 on_reply: Callable[["_Request", Any, BaseException | None], tuple[Any, BaseException | None]] | None) -> None:
        self.id, self.type, self.data, self.kind, self.rule, self.on_reply = rid, ftype, data, kind, rule, on_reply
        self.barrier = False
        self.covers: list[_Request] = []
        self.written = False
        self.gen = 0
        self.order = 0
        self.resent = False
        self.done = False
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # A request whose caller stopped waiting still gets its outcome: never "never retrieved".
        self.future.add_done_callback(_retrieve)


class _Pacer:
    def __init__(self) -> None:
        self.tokens = _PACE_BURST
        self.last = time.monotonic()

    async def wait(self) -> None:
        now = time.monotonic()
        self.tokens = min(_PACE_BURST, self.tokens + (now - self.last) * _PACE_RATE)
        self.last = now
        if self.tokens < 1:
            await asyncio.sleep((1 - self.tokens) / _PACE_RATE)
            self.tokens = 1
            self.last = time.monotonic()
        self.tokens -= 1


def _dead_slot(err: BaseException | None) -> bool:
    """Whether err means the slot can never be resumed again."""
    return isinstance(err, (SessionEndedError, ResumeExpiredError, ResumeInvalidError, NotFoundError))


def _permanent(err: BaseException) -> bool:
    """Whether a failed resume attempt should not be retried."""
    if isinstance(err, BrokerError):
        return not err.retryable and err.code not in ("internal", "limit_exceeded")
    return False


class Client:
    """One connection slot of a session, speaking frames (SPEC 3–13).

    Create it, register handlers, then ``await client.connect()``::

        client = Client("ws://127.0.0.1:8080/v1/ws", role="host", api_key="dev",
                        tools=[ToolDecl(name="lookup", description="…", parameters={"type": "object"})])
        client.on_tool_call(lambda f: ...)
        await client.connect()

    ``role`` is ``"host"`` or ``"agent"``. Authenticate with ``api_key`` (alone it creates a
    session; with ``session_id`` it attaches), ``session_id`` + ``join_token``, or a
    ``state_file`` left by an earlier process (when the file exists the client resumes the slot
    it names). ``backoff`` is the reconnect policy (a Backoff), ``logger`` a logging.Logger
    (default ``logging.getLogger("backchannel")``); ``ping_interval`` / ``ping_timeout``
    (seconds) are the client's own WebSocket keepalive: a connection whose pong is that late is
    dropped and resumed.
    """

    def __init__(self, url: str, *, role: str = "host", api_key: str | None = None,
                 session_id: str | None = None, join_token: str | None = None,
                 tools: Iterable[fr.ToolDecl] | None = None, state_file: str | None = None,
                 backoff: Backoff | None = None, logger: logging.Logger | None = None,
                 ping_interval: float | None = 15.0, ping_timeout: float | None = 20.0) -> None:
        self.url = endpoint_url(url)
        if role not in ("host", "agent"):
            raise ValueError(f"backchannel: role {role!r}: a Client is a host or an agent")
        self.role = role
        self._api_key, self._join_token_opt = api_key, join_token
        self._tools = list(tools) if tools is not None else None
        self._state_path = state_file
        self._backoff = backoff or Backoff()
        self.log = logger or logging.getLogger("backchannel")
        self._ping_interval, self._ping_timeout = ping_interval, ping_timeout
        self._id_prefix = secrets.token_hex(3)
        self._ids = itertools.count(1)
        self._handlers: dict[str, list[Handler]] = {}
        # The session and the slot.
        self.session_id: str | None = session_id
        self._join_token: str | None = join_token
        self.resume_token: str | None = None
        self.connection_id: str | None = None
        self.resume_window = 120.0
        self.heartbeat = 15.0
        self.last_seq = 0
        # The connection.
        self._ws: Any = None
        self._gen = 0
        self._syncing = False
        self._sync_req: _Request | None = None
        self._saw_deferred_resume = False
        self._decls: list[fr.ToolDecl] | None = None
        # Requests.
        self._queue: list[_Request] = []
        self._pending: dict[str, _Request] = {}
        self._order = 0
        self._wake = asyncio.Event()
        self._cancelled_jobs: dict[str, None] = {}
        # The end.
        self._started = False
        self._closing = False
        self.stopped = False
        self.error: BaseException | None = None
        self._done = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._state: StateFile | None = None

    # ------------------------------------------------------------------ handlers

    def on(self, frame_type: str, handler: Handler) -> Callable[[], None]:
        """Calls handler(frame) for every broker frame of that ``type`` that answers none of
        this client's requests (``"*"``: every such frame), in ``seq`` order. A handler that
        returns an awaitable is run as a task of its own. Returns a function that removes it."""
        self._handlers.setdefault(frame_type, []).append(handler)

        def off() -> None:
            try:
                self._handlers.get(frame_type, []).remove(handler)
            except ValueError:
                pass
        return off

    def on_tool_call(self, handler: Callable[[fr.ToolCall], Any]) -> Callable[[], None]:
        """tool_call: a call of one of this slot's tools (SPEC 5)."""
        return self.on("tool_call", handler)

    def on_tool_cancel(self, handler: Callable[[fr.ToolCancel], Any]) -> Callable[[], None]:
        """tool_cancel: stop that job promptly (SPEC 11)."""
        return self.on("tool_cancel", handler)

    def on_tool_interaction_answer(self, handler: Callable[[fr.ToolInteractionAnswer], Any]) -> Callable[[], None]:
        """tool_interaction_answer: the answer to a job's interaction (SPEC 9)."""
        return self.on("tool_interaction_answer", handler)

    def on_tool_job_narration(self, handler: Callable[[fr.ToolJobNarration], Any]) -> Callable[[], None]:
        """tool_job_narration: the lifecycle of a narration of a job (SPEC 8)."""
        return self.on("tool_job_narration", handler)

    def on_tool_job_delivery_failed(self, handler: Callable[[fr.ToolJobDeliveryFailed], Any]) -> Callable[[], None]:
        """tool_job_delivery_failed: a completion could not be voiced (SPEC 8)."""
        return self.on("tool_job_delivery_failed", handler)

    def on_tool_deferred_resume(self, handler: Callable[[fr.ToolDeferredResume], Any]) -> Callable[[], None]:
        """tool_deferred_resume: the slot's open deferred jobs after a resume (SPEC 10)."""
        return self.on("tool_deferred_resume", handler)

    def on_session_ended(self, handler: Callable[[fr.SessionEnded], Any]) -> Callable[[], None]:
        """session.ended: the last frame; the client stops with SessionEndedError."""
        return self.on("session.ended", handler)

    def on_error(self, handler: Callable[[fr.Error], Any]) -> Callable[[], None]:
        """error frames that answer none of this client's requests."""
        return self.on("error", handler)

    def on_connection(self, handler: Callable[[ConnectionEvent], Any]) -> Callable[[], None]:
        """Connection events: connected, dropped, resumed, stopped (a ConnectionEvent)."""
        return self.on("connection", handler)

    def _spawn(self, coro: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        async def run() -> Any:
            try:
                return await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("backchannel: %s failed", what)
        t = asyncio.ensure_future(run())
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    def _emit(self, key: str, value: Any) -> None:
        for h in list(self._handlers.get(key, [])) + (list(self._handlers.get("*", [])) if key != "connection" else []):
            try:
                r = h(value)
            except Exception:
                self.log.exception("backchannel: handler of %s failed", key)
                continue
            if inspect.isawaitable(r):
                self._spawn(r, f"handler of {key}")

    # ------------------------------------------------------------------ properties

    @property
    def join_token(self) -> str | None:
        """The token that lets more connections attach to the session: known when this client
        created the session, attached with it, or resumed from a state file that holds it."""
        return self._join_token

    @property
    def connected(self) -> bool:
        """Whether a transport is up right now."""
        return self._ws is not None and not self.stopped

    async def wait_closed(self) -> BaseException | None:
        """Waits until the client has stopped for good; returns why (``error``)."""
        await self._done.wait()
        return self.error

    async def __aenter__(self) -> "Client":
        if not self._started:
            await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ connecting

    def _snapshot(self) -> SavedState:
        return SavedState(self.session_id or "", self.resume_token or "", self.last_seq, self._join_token)

    async def connect(self) -> fr.Welcome:
        """Connects and sends hello: creates a session (api_key alone), attaches to one
        (session_id with join_token or api_key), or resumes the slot of the state file when
        that file exists. Returns the welcome once the tools of the hello are declared (and,
        on a resume, the replay has been handled).

        A refused hello raises the BrokerError of its code (UnauthorizedError, NotFoundError,
        SessionEndedError, ResumeInvalidError, …); when a saved slot cannot be resumed, the
        state file is removed so that the next connect starts afresh. An unreachable broker
        raises ConnectError: connect makes one attempt.
        """
        if self._started:
            raise BackchannelError("backchannel: connect was already called")
        self._started = True
        saved = None
        if self._state_path:
            saved = load_state(self._state_path)
            if saved and self.session_id and saved.session_id != self.session_id:
                raise ValueError(f"backchannel: state_file {self._state_path} belongs to session {saved.session_id}, "
                                 f"not to session_id {self.session_id}: remove the file or fix the option")
        if saved is None:
            if self._join_token_opt and not self.session_id:
                raise ValueError("backchannel: join_token needs session_id, the session it belongs to")
            if not self._api_key and not self._join_token_opt:
                raise ValueError("backchannel: set api_key (to create or attach to a session) or session_id with join_token")
        hello = fr.Hello(protocol=fr.PROTOCOL, role=self.role)  # type: ignore[arg-type]
        if saved:
            self.session_id, self._join_token, self.last_seq = saved.session_id, saved.join_token, saved.last_seq
            hello.session_id, hello.resume_token, hello.last_seq = saved.session_id, saved.resume_token, saved.last_seq
        else:
            hello.session_id, hello.api_key, hello.join_token = self.session_id, self._api_key, self._join_token_opt
        declared: _Request | None = None
        if self._tools:
            # A restarted process declares its tools too: it cannot know what its predecessor
            # declared, and the same set again changes nothing.
            hello.tools = self._tools
            declared = self._declare_request(self._tools)
            hello.id = declared.id
        try:
            ws, welcome = await self._dial(hello)
        except BrokerError as e:
            if saved and _dead_slot(e) and self._state_path:
                self.log.info("backchannel: the saved slot cannot be resumed (%s); removing the state file %s", e, self._state_path)
                remove_state(self._state_path, self.log)
                e.args = (f"{e.args[0]} (state_file was removed: the next connect starts afresh)",)
            self._finish_stop(e)
            raise
        except BaseException as e:
            self._finish_stop(e)
            raise
        if declared is not None:
            self._order += 1
            declared.written, declared.gen, declared.order = True, 1, self._order
            self._pending[declared.id] = declared
        if self._state_path:
            self._state = StateFile(self._state_path, self._snapshot, self.log)
        self._attach(ws, welcome, resumed=False)
        self._supervisor = asyncio.ensure_future(self._run(ws))
        if declared is not None:
            try:
                await declared.future
            except BaseException:
                await self.close()
                raise
        if saved is not None:
            # The replay is behind us once a barrier sent after it is answered.
            await self._request(fr.JobCancel(call_id=BARRIER_CALL_ID), _ANSWERED, _ALWAYS)
        return welcome

    async def _dial(self, hello: fr.Hello) -> tuple[Any, fr.Welcome]:
        try:
            ws = await asyncio.wait_for(websockets.connect(  # type: ignore[attr-defined]
                self.url, open_timeout=_DIAL_TIMEOUT, ping_interval=self._ping_interval,
                ping_timeout=self._ping_timeout, close_timeout=2, max_size=_READ_LIMIT,
                compression=None), _DIAL_TIMEOUT + 1)
        except InvalidURI as e:
            raise ValueError(f"backchannel: url {self.url!r}: {e}") from e
        except (OSError, asyncio.TimeoutError, InvalidHandshake, ConnectionClosed, EOFError, Exception) as e:
            raise ConnectError(f"backchannel: cannot reach the broker at {self.url} (check the url and that the broker runs): {e}") from e
        try:
            await asyncio.wait_for(ws.send(fr.encode(hello)), _WRITE_TIMEOUT)
            while True:
                msg = await asyncio.wait_for(ws.recv(), _DIAL_TIMEOUT)
                if isinstance(msg, bytes):
                    continue
                f = fr.decode(msg)
                if isinstance(f, fr.Welcome):
                    return ws, f
                if isinstance(f, fr.Error):
                    raise broker_error(f, "hello refused")
                raise ProtocolError(f"backchannel: the broker answered hello with {f.TYPE} instead of welcome")
        except (OSError, asyncio.TimeoutError, ConnectionClosed, EOFError) as e:
            _abort(ws)
            raise ConnectError(f"backchannel: waiting for the welcome: {e!r}") from e
        except BaseException:
            _abort(ws)
            raise

    def _attach(self, ws: Any, w: fr.Welcome, resumed: bool) -> None:
        self._gen += 1
        self._ws = ws
        self.session_id = w.session_id
        self.resume_token = w.resume_token
        self.connection_id = w.connection_id
        if w.join_token:
            self._join_token = w.join_token
        if w.resume_window_ms > 0:
            self.resume_window = w.resume_window_ms / 1000
        if w.heartbeat_ms > 0:
            self.heartbeat = w.heartbeat_ms / 1000
        self._saw_deferred_resume = False
        if resumed:
            self._syncing = True
            self._sync_req = self._new_barrier([])
        if self._state:
            self._state.save()  # the old token is void now: keep the new one first
        self.log.debug("backchannel: connected session=%s connection=%s resumed=%s", w.session_id, w.connection_id, resumed)
        self._emit("connection", ConnectionEvent("resumed" if resumed else "connected"))
        self._wake.set()

    async def _run(self, ws: Any) -> None:
        """The supervisor: serves connection after connection until the client stops."""
        try:
            while ws is not None:
                err = await self._serve(ws)
                if self.stopped or self._closing:
                    return
                self._ws = None
                self._wake.set()
                self.log.info("backchannel: transport dropped (%s); resuming", err)
                self._emit("connection", ConnectionEvent("dropped", err))
                ws = await self._reconnect(err)
        except asyncio.CancelledError:
            pass
        except Exception as e:  # a bug: stop rather than hang
            self.log.exception("backchannel: connection supervisor failed")
            self._stop(e)

    async def _serve(self, ws: Any) -> BaseException | None:
        gen = self._gen
        writer = asyncio.ensure_future(self._write_loop(ws, gen))
        err: BaseException | None = None
        try:
            async for msg in ws:
                if isinstance(msg, str):
                    self._receive(msg)
                if self.stopped:
                    break
        except ConnectionClosed as e:
            err = e
        except Exception as e:
            err = e
        else:
            err = ConnectError("backchannel: the connection closed")
        finally:
            writer.cancel()
            _abort(ws)
            try:
                await writer
            except (asyncio.CancelledError, Exception):
                pass
        return err

    async def _reconnect(self, cause: BaseException | None) -> Any:
        """Resumes the slot on a new connection with backoff (SPEC 10, 15); None when the
        client stopped."""
        limit = self._backoff.max_elapsed if self._backoff.max_elapsed is not None else self.resume_window
        start = time.monotonic()
        delays = self._backoff.delays()
        last = cause
        attempt = 0
        while not self.stopped:
            if attempt > 0:
                d = next(delays)
                if time.monotonic() - start + d > limit:
                    self._stop(ConnectError(f"backchannel: gave up resuming after {time.monotonic() - start:.1f}s: {last}", retryable=False))
                    return None
                await asyncio.sleep(d)
                if self.stopped:
                    return None
            attempt += 1
            hello = fr.Hello(protocol=fr.PROTOCOL, role=self.role, session_id=self.session_id,  # type: ignore[arg-type]
                             resume_token=self.resume_token, last_seq=self.last_seq)
            try:
                ws, w = await self._dial(hello)
            except BrokerError as e:
                last = e
                if _permanent(e):
                    self._stop(e)
                    return None
                continue
            except (ConnectError, ProtocolError, FrameError) as e:
                last = e
                self.log.debug("backchannel: resume attempt %d failed: %s", attempt, e)
                continue
            if self.stopped or self._closing:
                _abort(ws)
                return None
            self._attach(ws, w, resumed=True)
            return ws
        return None

    # ------------------------------------------------------------------ writing

    async def _write_loop(self, ws: Any, gen: int) -> None:
        pacer = _Pacer()
        while True:
            batch = await self._next_batch(gen)
            if batch is None:
                return
            for i, r in enumerate(batch):
                await pacer.wait()
                try:
                    await asyncio.wait_for(ws.send(r.data), _WRITE_TIMEOUT)
                except (asyncio.CancelledError, Exception):
                    # r itself may have left: it stays pending and is settled after the resume.
                    self._unwrite(batch[i + 1:])
                    _abort(ws)
                    raise

    async def _next_batch(self, gen: int) -> list[_Request] | None:
        while True:
            if self._gen != gen or self.stopped or self._ws is None:
                return None
            batch: list[_Request] = []
            if self._syncing:
                if self._sync_req is not None and not self._sync_req.written:
                    batch = [self._sync_req]
            elif self._queue:
                batch, self._queue = self._queue, []
            if batch:
                covers = [r for r in batch if r.kind == _SILENT]
                if covers:
                    batch.append(self._new_barrier(covers))
                for r in batch:
                    self._order += 1
                    r.written, r.gen, r.order = True, gen, self._order
                    self._pending[r.id] = r
                return batch
            self._wake.clear()
            await self._wake.wait()

    def _unwrite(self, rs: list[_Request]) -> None:
        back = []
        for r in rs:
            self._pending.pop(r.id, None)
            r.written = False
            if r.barrier or r.done:
                continue
            back.append(r)
        self._queue = back + self._queue

    def _new_id(self) -> str:
        return f"{self._id_prefix}-{next(self._ids)}"

    def _make(self, frame: fr.Frame, kind: str, rule: str, on_reply: Any = None) -> _Request:
        rid = self._new_id()
        frame.id = rid  # type: ignore[attr-defined]
        data = fr.encode(frame)
        if len(data.encode("utf-8")) > _MAX_FRAME_BYTES:
            raise LimitExceededError(f"a {frame.TYPE} frame of {len(data)} bytes is over the broker's frame limit of {_MAX_FRAME_BYTES} bytes",
                                     what="not sent")
        return _Request(rid, frame.TYPE, data, kind, rule, on_reply)

    def _new_barrier(self, covers: list[_Request]) -> _Request:
        r = self._make(fr.JobCancel(call_id=BARRIER_CALL_ID), _ANSWERED, _NEVER)
        r.barrier, r.covers = True, covers
        return r

    async def _do(self, r: _Request) -> Any:
        if self.stopped:
            raise self.error or ClosedError("backchannel: the client has stopped")
        self._queue.append(r)
        self._wake.set()
        try:
            return await asyncio.shield(r.future)
        except asyncio.CancelledError:
            if not r.written and not r.done:
                r.done = True
                try:
                    self._queue.remove(r)
                except ValueError:
                    pass
                r.future.cancel()
            raise

    async def _request(self, frame: fr.Frame, kind: str, rule: str, on_reply: Any = None) -> Any:
        if not self._started:
            raise BackchannelError("backchannel: call connect() first")
        return await self._do(self._make(frame, kind, rule, on_reply))

    def _complete(self, r: _Request, f: Any, err: BaseException | None) -> None:
        if r.on_reply is not None:
            try:
                f, err = r.on_reply(r, f, err)
            except BaseException as e:
                f, err = None, e
        self._settle(r, f, err)

    def _settle(self, r: _Request, f: Any, err: BaseException | None) -> None:
        if r.done:
            return
        r.done = True
        self._pending.pop(r.id, None)
        if r.future.done():
            return
        if err is not None:
            r.future.set_exception(err)
        else:
            r.future.set_result(f)

    # ------------------------------------------------------------------ reading

    def _receive(self, data: str) -> None:
        try:
            f = fr.decode(data)
        except FrameError as e:
            # A frame of a newer protocol revision, say: it cannot be acted on, but its seq
            # counts as seen so that a resume does not ask for it again.
            seq = e.raw.get("seq") if isinstance(e.raw, dict) else None
            self.log.warning("backchannel: ignoring a frame the SDK cannot decode (seq %s): %s", seq, e)
            if isinstance(seq, int) and seq > self.last_seq:
                self.last_seq = seq
            return
        seq = getattr(f, "seq", None) or 0
        if seq:
            if seq <= self.last_seq:
                self.log.debug("backchannel: dropping %s seq %d seen before", f.TYPE, seq)
                return
            if self.last_seq and seq != self.last_seq + 1:
                self.log.warning("backchannel: seq gap after %d: got %d", self.last_seq, seq)
        self._route(f, getattr(f, "ref", None))
        if seq:
            self.last_seq = seq
            if self._state:
                self._state.touch()

    def _route(self, f: fr.Frame, ref: str | None) -> None:
        if ref and self._answer(ref, f):
            return
        if isinstance(f, fr.ToolCancel):
            # Remembered so that a result sent again after a drop can tell a cancel from its
            # own first copy (send_tool_result); the oldest are forgotten past a bound.
            for ref in (f.call_id, f.handle):
                if ref:
                    self._cancelled_jobs[ref] = None
            while len(self._cancelled_jobs) > _CANCELLED_KEPT:
                del self._cancelled_jobs[next(iter(self._cancelled_jobs))]
        elif isinstance(f, fr.ToolDeferredResume):
            self._saw_deferred_resume = True
        elif isinstance(f, fr.Error):
            self.log.warning("backchannel: error frame from the broker: %s: %s (ref %s)", f.code, f.message, ref)
            if not ref and f.code == "limit_exceeded":
                # Not matched to its request: fail the unconfirmed silent ones (a false
                # failure is better than a false success).
                for r in [r for r in self._pending.values() if r.kind == _SILENT and not r.done]:
                    self._complete(r, None, broker_error(f))
        self._emit(f.TYPE, f)
        if isinstance(f, fr.SessionEnded):
            self._stop(SessionEndedError(reason=f.reason))

    def _answer(self, ref: str, f: fr.Frame) -> bool:
        r = self._pending.get(ref)
        if r is None:
            return False
        if r.barrier:
            r.done = True
            self._pending.pop(r.id, None)
            for s in r.covers:
                if not s.done:
                    self._complete(s, None, None)
            if r is self._sync_req:
                self._resync()
            return True
        if isinstance(f, fr.Error):
            self._complete(r, None, broker_error(f, r.type))
        elif r.kind == _SILENT:
            self._complete(r, None, None)
        else:
            self._complete(r, f, None)
        return True

    def _resync(self) -> None:
        """The sync barrier of a resumed connection was answered: every frame the broker applied
        from older connections has been answered by now."""
        self._syncing, self._sync_req = False, None
        old = []
        for rid, r in list(self._pending.items()):
            if r.gen >= self._gen:
                continue
            if r.barrier:
                del self._pending[rid]
                continue
            old.append(r)
        old.sort(key=lambda r: r.order)
        front, failed = [], []
        for r in old:
            if r.kind == _ANSWERED or r.rule == _ALWAYS:
                pass
            elif r.rule == _RESULT:
                r.resent = True
            else:
                failed.append(r)
                continue
            self._pending.pop(r.id, None)
            r.written = False
            if r.kind == _ANSWERED or r.rule == _ALWAYS:
                r.resent = True
            front.append(r)
        if self._decls is not None and not self._saw_deferred_resume:
            # The broker sends tool_deferred_resume to every slot that has declared tools:
            # without one, it lost the tool set, so declare it again.
            front.insert(0, self._declare_request(self._decls))
        self._queue = front + self._queue
        for r in failed:
            self._complete(r, None, UnconfirmedError(f"backchannel: the connection dropped before the broker confirmed the {r.type} frame, so it may or may not have been applied"))
        if front:
            self.log.debug("backchannel: resending %d frames after the resume", len(front))
        self._wake.set()

    # ------------------------------------------------------------------ the end

    def _stop(self, err: BaseException) -> None:
        if self.stopped:
            return
        self.stopped, self.error = True, err
        for r in self._queue:
            self._settle(r, None, err)
        self._queue = []
        for r in list(self._pending.values()):
            self._settle(r, None, err)
        ws = self._ws
        self._ws = None
        if ws is not None:
            _abort(ws)
        self._wake.set()
        if self._supervisor is not None and self._supervisor is not asyncio.current_task():
            self._supervisor.cancel()
        self._finish_stop(err)
        self.log.debug("backchannel: client stopped: %s", err)
        self._emit("connection", ConnectionEvent("stopped", err))

    def _finish_stop(self, err: BaseException) -> None:
        self.stopped = True
        if self.error is None:
            self.error = err
        if self._state:
            self._state.finish(remove=_dead_slot(err))
        self._done.set()

    async def close(self) -> None:
        """Closes the transport and stops the client; the broker keeps the slot resumable for
        its resume window (with a state file, a new process can resume it)."""
        if self._closing or self.stopped:
            await self._join()
            return
        self._closing = True
        ws = self._ws
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(code=1001, reason="client closed"), 3)
            except (Exception, asyncio.TimeoutError):
                pass
        self._stop(ClosedError("backchannel: closed; connect again (the slot stays resumable with a state file)"))
        await self._join()

    async def _join(self) -> None:
        sup = self._supervisor
        if sup is not None and sup is not asyncio.current_task():
            try:
                await sup
            except (asyncio.CancelledError, Exception):
                pass
        for t in list(self._tasks):
            if t is not asyncio.current_task():
                t.cancel()

    def abort(self) -> None:
        """Drops the transport at once, without a close handshake, as a network failure
        would: the client then resumes by itself (for tests of your own reconnect handling)."""
        if self._ws is not None:
            _abort(self._ws)

    # ------------------------------------------------------------------ host frames

    def _declare_request(self, tools: list[fr.ToolDecl]) -> _Request:
        def on_reply(r: _Request, f: Any, err: BaseException | None) -> tuple[Any, BaseException | None]:
            if err is None:
                if not isinstance(f, fr.ToolsDeclared):
                    return None, ProtocolError(f"backchannel: tools.declare answered with {f.TYPE}")
                self._decls = list(tools)
            return f, err
        return self._make(fr.ToolsDeclare(tools=list(tools)), _ANSWERED, _NEVER, on_reply)

    async def send_tools_declare(self, tools: Iterable[fr.ToolDecl]) -> fr.ToolsDeclared:
        """tools.declare: replaces this slot's tool set (SPEC 4); returns tools.declared. A
        rejected declaration raises BadFrameError (its message names the tool and field) or
        LimitExceededError and changes nothing."""
        return await self._do(self._declare_request(list(tools)))  # type: ignore[no-any-return]

    async def send_tool_deferred(self, call_id: str, handle: str, status_label: str | None = None) -> fr.ToolDeferredAck:
        """tool_deferred: defers a pending call under handle (SPEC 6). Returns the
        tool_deferred_ack when accepted; raises DeferRejected (``.reason``) when not."""
        def on_reply(r: _Request, f: Any, err: BaseException | None) -> tuple[Any, BaseException | None]:
            if err is not None:
                return None, err
            if not isinstance(f, fr.ToolDeferredAck):
                return None, ProtocolError(f"backchannel: tool_deferred answered with {f.TYPE}")
            if not f.accepted:
                return None, DeferRejected(call_id, handle, f.reason or "unknown", f)
            return f, None
        return await self._request(fr.ToolDeferred(call_id=call_id, handle=handle, status_label=status_label or None),  # type: ignore[no-any-return]
                                   _ANSWERED, _NEVER, on_reply)

    @staticmethod
    def _ref(call_id: str) -> dict[str, str]:
        if not call_id:
            raise ValueError("backchannel: a call id or handle is needed")
        return {"call_id": call_id} if fr.is_broker_call_id(call_id) else {"handle": call_id}

    async def send_tool_progress(self, call_id: str, note: str) -> None:
        """tool_progress: silent telemetry for the agent's context; re-arms a pending call's
        ordinary timeout (SPEC 7). ``call_id`` is the broker call id or, once deferred, the
        handle. Returns once applied; CallFinishedError when the job is over."""
        await self._request(fr.ToolProgress(note=note, **self._ref(call_id)), _SILENT, _ALWAYS)

    async def send_tool_partial_result(self, call_id: str, segment: Any, reply: bool = False,
                                       interaction: fr.Interaction | None = None, *, phase: str | None = None) -> None:
        """tool_partial_result: a piece of the eventual answer (SPEC 7). ``reply=True`` narrates
        it when the floor is free (a milestone); ``interaction`` asks a decision (SPEC 9; give
        it an ``id`` to know which answer is which). ``call_id``: the call id or handle."""
        if segment is None:
            raise ValueError("backchannel: a partial result needs a segment")
        rule = _NEVER if (reply or interaction is not None) else _ALWAYS  # a repeat would be narrated twice
        await self._request(fr.ToolPartialResult(segment=segment, reply=True if reply else None, phase=phase,
                                                 interaction=interaction, **self._ref(call_id)), _SILENT, rule)

    async def send_tool_result(self, call_id: str, output: Any = None, error: str | None = None) -> None:
        """tool_result: finishes the call with ``output`` (any JSON value; None is sent as "")
        or, with ``error``, as failed (SPEC 5). ``call_id``: the call id or handle.

        When the transport dropped right after the result was sent, it is sent again after the
        resume; if the broker then answers call_finished although the job was not cancelled,
        the first one was applied and this returns normally."""
        ref = self._ref(call_id)
        if error is not None:
            f = fr.ToolResult(error=error or "tool failed", **ref)
        else:
            f = fr.ToolResult(output="" if output is None else output, **ref)

        def on_reply(r: _Request, got: Any, err: BaseException | None) -> tuple[Any, BaseException | None]:
            if isinstance(err, CallFinishedError) and r.resent and call_id not in self._cancelled_jobs:
                return None, None
            return got, err
        await self._request(f, _SILENT, _RESULT, on_reply)

    async def send_tool_interaction_update(self, call_id: str, interaction_id: str, state: str) -> fr.ToolInteractionUpdateAck:
        """tool_interaction_update: closes an open interaction as ``resolved``, ``cancelled``
        or ``superseded`` (SPEC 9); returns the deterministic ack (``result``: applied,
        already_closed or unknown_interaction)."""
        return await self._request(fr.ToolInteractionUpdate(interaction_id=interaction_id, state=state,  # type: ignore[arg-type,no-any-return]
                                                            **self._ref(call_id)), _ANSWERED, _NEVER)

    async def send_job_cancel(self, call_id: str) -> fr.JobCancelResult:
        """job.cancel of a job of the session by call id or handle (SPEC 5, 11); returns
        job.cancel_result (``result``: cancelled, already_done, already_canceled, unknown_call)."""
        return await self._request(fr.JobCancel(**self._ref(call_id)), _ANSWERED, _NEVER)  # type: ignore[no-any-return]

    async def send_inject(self, text: str, speak: bool = True) -> None:
        """inject: asks the voice agent to take a turn about text (SPEC 8); speak=False only adds
        it to its context. InjectRejectedError when it cannot be taken now."""
        await self._request(fr.Inject(text=text, speak=None if speak else False), _SILENT, _NEVER)

    async def send_session_end(self) -> None:
        """session.end: ends the session for everyone (SPEC 3.6); returns once it has ended."""
        try:
            await self._request(fr.SessionEnd(), _SILENT, _ALWAYS)
        except SessionEndedError:
            pass
        await self._done.wait()
        if not isinstance(self.error, SessionEndedError):
            raise self.error or ClosedError("backchannel: stopped")

    # ------------------------------------------------------------------ agent frames

    async def send_agent_tool_call(self, call_id: str, conversation_id: str, name: str, arguments: Any,
                                   local: bool = False) -> None:
        """agent.tool_call (SPEC 13): returns once the broker took it; its agent.tool_result
        arrives as a frame (Agent.call waits for it)."""
        def on_reply(r: _Request, got: Any, err: BaseException | None) -> tuple[Any, BaseException | None]:
            # Sent again after a drop, a call whose first copy got through is refused as a
            # duplicate id; its outcome still reaches us as the call's.
            if r.resent and err is not None and getattr(err, "code", "") == "bad_frame":
                return None, None
            return got, err
        await self._request(fr.AgentToolCall(call_id=call_id, conversation_id=conversation_id, name=name,
                                             arguments={} if arguments is None else arguments,
                                             local=True if local else None), _SILENT, _ALWAYS, on_reply)

    async def send_agent_turn_start(self, conversation_id: str) -> None:
        await self._request(fr.AgentTurnStart(conversation_id=conversation_id), _SILENT, _NEVER)

    async def send_agent_turn_end(self, conversation_id: str) -> None:
        await self._request(fr.AgentTurnEnd(conversation_id=conversation_id), _SILENT, _NEVER)

    async def send_agent_message(self, conversation_id: str, to_conversation_id: str, text: str) -> fr.AgentMessageCommitted:
        return await self._request(fr.AgentMessage(conversation_id=conversation_id,  # type: ignore[no-any-return]
                                                   to_conversation_id=to_conversation_id, text=text), _ANSWERED, _NEVER)

    async def send_agent_local_result(self, call_id: str, conversation_id: str, output: Any = None,
                                      error: str | None = None) -> None:
        f = fr.AgentLocalResult(call_id=call_id, conversation_id=conversation_id)
        if error is not None:
            f.error = error or "tool failed"
        else:
            f.output = "" if output is None else output
        await self._request(f, _SILENT, _ALWAYS)

    async def send_agent_interaction_answer(self, conversation_id: str, interaction_id: str, text: str,
                                            option: str | None = None) -> None:
        await self._request(fr.AgentInteractionAnswer(conversation_id=conversation_id, interaction_id=interaction_id,
                                                      text=text, option=option), _SILENT, _NEVER)

    async def send_agent_final(self, conversation_id: str, text: str) -> None:
        await self._request(fr.AgentFinal(conversation_id=conversation_id, text=text), _SILENT, _NEVER)

    async def send_conversation_create(self, parent_conversation_id: str, parent_call_id: str | None = None) -> fr.ConversationCreated:
        return await self._request(fr.ConversationCreate(parent_conversation_id=parent_conversation_id,  # type: ignore[no-any-return]
                                                         parent_call_id=parent_call_id), _ANSWERED, _NEVER)

    async def send_conversation_cancel(self, conversation_id: str) -> None:
        await self._request(fr.ConversationCancel(conversation_id=conversation_id), _SILENT, _ALWAYS)


def _retrieve(f: "asyncio.Future[Any]") -> None:
    if not f.cancelled():
        f.exception()


def _abort(ws: Any) -> None:
    t = getattr(ws, "transport", None)
    if t is not None:
        try:
            t.abort()
        except Exception:
            pass
