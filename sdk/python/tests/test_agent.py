"""The text agent side (SPEC 13) with the SDK's Agent against a real broker on both stores:
wait exact / bare / timed, parallel waits, interruptions, the cancel and status texts, local
calls and child conversations. A Python host serves a deferred tool whose jobs finish when the
test opens their gate."""

import asyncio

from backchannel import Host, Tool
from helpers import WAIT, fresh, get, pair, prompt_matching

INTERRUPTED = "internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: exact"


class Gates:
    """A deferred tool "job" whose call with {"key": K} finishes with K when gate K opens."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}
        self.jobs: dict[str, asyncio.Future] = {}

    def event(self, key: str) -> asyncio.Event:
        return self.events.setdefault(key, asyncio.Event())

    def job(self, key: str) -> asyncio.Future:
        return self.jobs.setdefault(key, asyncio.get_running_loop().create_future())

    def open(self, key: str) -> None:
        self.event(key).set()

    def tools(self) -> list[Tool]:
        async def job(call):
            key = call.arguments["key"]
            j = await call.defer(fresh("job-" + key))
            self.job(key).set_result(j)
            await self.event(key).wait()
            return key

        async def quick(call):
            return "ok"
        return [Tool("job", job, deferred=True), Tool("quick", quick)]


async def start(broker) -> tuple[Gates, Host, object]:
    g = Gates()
    h, a = await pair(broker, g.tools())
    return g, h, a


async def test_wait_exact(broker):
    g, h, a = await start(broker)
    r = await a.call("job", {"key": "a"})
    assert r.is_background
    t = asyncio.ensure_future(a.wait(r.call_id))
    await asyncio.sleep(0.3)
    assert not t.done()  # it blocks while the call runs
    g.open("a")
    w = await asyncio.wait_for(t, WAIT)
    assert (w.kind, w.content, w.headers) == ("result", "a", {})
    again = await a.wait(r.call_id)
    assert (again.kind, again.content) == ("error", "error: Tool call result already consumed")
    ghost = await a.wait("ghost-1")
    assert ghost.content == "error: Unknown tool call id\ntool_call_id: ghost-1" and ghost.headers["tool_call_id"] == "ghost-1"
    await a.close()
    await h.close()


async def test_parallel_and_bare_waits(broker):
    g, h, a = await start(broker)
    # Two exact waits on one id: one gets the result, the other is refused at once.
    r = await a.call("job", {"key": "b"})
    t1 = asyncio.ensure_future(a.wait(r.call_id))
    await asyncio.sleep(0.2)
    t2 = await a.wait(r.call_id)
    assert t2.content == "error: Tool call result is already being waited for"
    g.open("b")
    assert (await asyncio.wait_for(t1, WAIT)).content == "b"

    # Bare waits consume completed results in completion order, naming the call.
    rc = await a.call("job", {"key": "c"})
    rd = await a.call("job", {"key": "d"})
    for key, rr in (("d", rd), ("c", rc)):
        g.open(key)
        await prompt_matching(a, lambda p: p.text == f"[internal] Tool call `{rr.call_id}` completed. Its result is queued; use `wait` to consume it.")
    w1, w2 = await a.wait(), await a.wait()
    assert (w1.original_tool_call_id, w1.body) == (rd.call_id, "d")
    assert w1.content == f"original_tool_call_id: {rd.call_id}\n\nd"
    assert (w2.original_tool_call_id, w2.body) == (rc.call_id, "c")
    none = await a.wait()
    assert none.content == "error: No background tool call to wait for"

    # A bare wait blocks for the next completion; a second one meanwhile is refused.
    re_ = await a.call("job", {"key": "e"})
    b1 = asyncio.ensure_future(a.wait())
    await asyncio.sleep(0.2)
    b2 = await a.wait()
    assert b2.content == "error: A wait for the next background completion is already pending"
    g.open("e")
    w = await asyncio.wait_for(b1, WAIT)
    assert (w.original_tool_call_id, w.body) == (re_.call_id, "e")
    await a.close()
    await h.close()


async def test_timed_wait_and_interruptions(broker):
    g, h, a = await start(broker)
    bad = await a.wait(timeout_minutes=0)
    assert (bad.kind, bad.content) == ("error", "error: timeout_minutes must be a positive integer")
    child = await a.create_child()
    assert child.id.startswith("conv_") and child is not a

    # A timed wait returns input_available when a message arrives.
    t = asyncio.ensure_future(a.wait(timeout_minutes=5))
    await asyncio.sleep(0.2)
    assert not t.done()
    assert (await child.message("root", "hello root")).startswith("msg_")
    w = await asyncio.wait_for(t, WAIT)
    assert (w.kind, w.content, w.input_available, w.timed_out) == ("result", "input_available: true", True, False)
    p = await prompt_matching(a, lambda p: p.text.startswith("Message from"))
    assert p.text == f"Message from {child.id}:\nhello root" and not p.internal

    # An exact wait is interrupted by activating input and consumes nothing.
    r = await a.call("job", {"key": "f"})
    t = asyncio.ensure_future(a.wait(r.call_id))
    await asyncio.sleep(0.2)
    await child.status("working", "digging")
    w = await asyncio.wait_for(t, WAIT)
    assert w.content == INTERRUPTED and w.interrupted and w.body is None
    p = await prompt_matching(a, lambda p: p.text.startswith("Watched agent"))
    assert p.text == f"Watched agent {child.id} status: working on digging"
    g.open("f")
    assert (await asyncio.wait_for(a.wait(r.call_id), WAIT)).content == "f"
    await a.close()
    await h.close()


async def test_cancel_texts(broker):
    g, h, a = await start(broker)
    r = await a.call("job", {"key": "g"})
    job = await asyncio.wait_for(g.job("g"), WAIT)
    c = await a.cancel(r.call_id)
    assert (c.kind, c.content) == ("result", "Tool cancellation requested")
    await asyncio.wait_for(job.cancelled.wait(), WAIT)
    assert job.cancel_reason == "agent_request"
    assert (await a.cancel(r.call_id)).content == "error: Tool call already canceled"
    w = await a.wait(r.call_id)
    assert (w.kind, w.content, w.error) == ("error", "error: Tool call canceled", "Tool call canceled")
    q = await a.call("quick")
    assert q.content == "ok"
    assert (await a.cancel(q.call_id)).content == "error: Tool call is already done"
    assert (await a.cancel("nope")).content == "error: Unknown tool call id\ntool_call_id: nope"
    assert (await a.cancel("")).content == "error: `tool_call_id` must not be empty"
    st = await a.status("working", "cancelling things")
    assert (await a.cancel(st.call_id)).content == "error: Tool call cannot be canceled"
    await a.close()
    await h.close()


async def test_status_and_children(broker):
    g, h, a = await start(broker)
    assert (await a.status("sleeping", "x")).content == "error: status state must be one of working, waiting, blocked, done"
    assert (await a.status("working", "   ")).content == "error: status title must not be empty"
    assert (await a.status("working", "a\nb")).content == "error: status title must be a single line without control characters"
    assert (await a.status("working", "x" * 161)).content == "error: status title must be at most 160 UTF-8 bytes"
    child = await a.create_child()
    s = await child.status("working", "  Looking up  ")
    assert (s.kind, s.content) == ("result", "Status set to `working`: Looking up")
    await child.final("all done")
    texts = []
    async for p in a.prompts():  # the root conversation's prompts, as an async iterator
        texts.append(p.text)
        if p.text.startswith(f"Watched agent {child.id} final"):
            break
    assert f"Watched agent {child.id} status: working on Looking up" in texts
    assert texts[-1] == f"Watched agent {child.id} final response:\nall done"
    await a.close()
    await h.close()


async def test_local_calls_and_parent_cancel(broker):
    """A local call is the harness's own; a child conversation tied to it loses its calls
    (parent_cancelled) when it is cancelled, and the harness is told with agent.local_cancel."""
    g, h, a = await start(broker)
    cid = fresh("calc")
    t = asyncio.ensure_future(a.call("calc", {"x": 1}, call_id=cid, local=True))
    await asyncio.sleep(0.1)
    await a.local_result(cid, output={"n": 1})
    assert (await asyncio.wait_for(t, WAIT)).content == '{"n":1}'

    cancels: asyncio.Queue = asyncio.Queue()
    a.on_local_cancel(cancels.put_nowait)
    sub = await a.call("subagent", {"task": "report"}, local=True)
    assert sub.is_background  # after the broker's background_after
    child = await a.create_child(parent_call_id=sub.call_id)
    r = await child.call("job", {"key": "h"})
    assert r.is_background
    job = await asyncio.wait_for(g.job("h"), WAIT)
    assert (await a.cancel(sub.call_id)).content == "Tool cancellation requested"
    lc = await get(cancels)
    assert (lc.call_id, lc.conversation_id) == (sub.call_id, "root")
    await asyncio.wait_for(job.cancelled.wait(), WAIT)
    assert job.cancel_reason == "parent_cancelled"
    assert (await a.wait(sub.call_id)).error == "Tool call canceled"
    await a.close()
    await h.close()
