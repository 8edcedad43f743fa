"""Helpers of the SDK's tests: a host with a text agent in its session, and a TCP proxy that
can cut and refuse connections (a network failure between a host and the broker)."""

import asyncio
import secrets
from typing import Any, Callable

from backchannel import Agent, Backoff, Host, ToolResult
from backchannel import frames as fr

WAIT = 10.0  # bound of every single wait of the tests


def fresh(prefix: str) -> str:
    """A handle no other test (or earlier run on the same Redis) has used."""
    return f"{prefix}-{secrets.token_hex(6)}"


def fast_backoff() -> Backoff:
    return Backoff(initial=0.05, maximum=0.1, max_elapsed=15)


async def pair(broker, tools, **host_kw) -> tuple[Host, Agent]:
    """A host with tools in a new session, and a text agent attached to it."""
    h = await Host.connect(host_kw.pop("url", broker.ws_url), api_key=broker.key, tools=tools, **host_kw)
    a = await Agent.connect(broker.ws_url, session_id=h.session_id, join_token=h.join_token)
    return h, a


async def final(conv, r: ToolResult) -> ToolResult:
    """The final result of a call: r itself, or — when it went to the background (a busy
    machine can take longer than the broker's background_after) — the result through wait."""
    if r.is_background:
        return await asyncio.wait_for(conv.wait_result(r.call_id), WAIT)
    return r


async def prompt_matching(conv, pred: Callable[[fr.AgentPrompt], bool]) -> fr.AgentPrompt:
    """The next prompt of conv that pred accepts (others, such as the status reminder, are skipped)."""
    while True:
        p = await conv.next_prompt(WAIT)
        if pred(p):
            return p


async def get(q: "asyncio.Queue[Any]") -> Any:
    return await asyncio.wait_for(q.get(), WAIT)


class Proxy:
    """A TCP proxy on a free loopback port in front of the broker. cut() resets every
    connection; refuse=True closes new ones at once (the broker is out of reach); lose=True
    drops what the client sends."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.refuse = False
        self.lose = False  # what the client sends is lost on the way (the broker never sees it)
        self.conns: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> "Proxy":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/ws"

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if self.refuse:
            w.transport.abort()
            return
        try:
            br, bw = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            w.transport.abort()
            return
        self.conns.append((w, bw))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upstream: bool) -> None:
            try:
                while data := await src.read(65536):
                    if upstream and self.lose:
                        continue
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.transport.abort()
        await asyncio.gather(pipe(r, bw, True), pipe(br, w, False))

    def cut(self) -> None:
        for a, b in self.conns:
            a.transport.abort()
            b.transport.abort()
        self.conns.clear()

    async def close(self) -> None:
        self.cut()
        if self.server:
            self.server.close()
