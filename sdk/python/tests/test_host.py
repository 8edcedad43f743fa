"""The scenario table of SPEC 20 for the Python host, against a real `backchannel serve` on
both stores (the broker fixture is parametrized: every test runs on memory and on Redis). A
text agent (the SDK's Agent) plays the caller's side and makes the calls."""

import asyncio
import json
import os
import time

import pytest

from backchannel import (Backoff, BadFrameError, CallFinishedError, Client, DeferRejected, Host,
                         InjectRejectedError, Interaction, ResumeExpiredError, SessionEndedError, Tool, ToolDecl,
                         UnauthorizedError)
from backchannel import frames as fr
from helpers import WAIT, Proxy, fast_backoff, final, fresh, get, pair, prompt_matching


async def test_fast_call(broker):
    """A handler's value, its exception and a plain function's string reach the agent as the
    result; a tool nobody serves is not available."""
    async def lookup(call):
        return {"city": call.arguments["city"], "temp_c": 21}

    async def broken(call):
        raise RuntimeError("the weather service is down")

    def greet(call):  # a plain function answers too
        return "hello there"

    h, a = await pair(broker, [Tool("lookup", lookup, description="Weather"), Tool("broken", broken), Tool("greet", greet)])
    assert h.session_id.startswith("sess_") and h.join_token
    r = await final(a, await a.call("lookup", {"city": "Oslo"}))
    assert (r.kind, r.content) == ("result", '{"city":"Oslo","temp_c":21}') and r.json() == {"city": "Oslo", "temp_c": 21}
    r = await final(a, await a.call("broken"))
    assert (r.kind, r.content) == ("error", "error: the weather service is down") and r.error == "the weather service is down"
    r = await final(a, await a.call("greet"))
    assert r.content == "hello there" and r.body == "hello there"
    r = await a.call("nosuch")
    assert r.content == "error: Tool nosuch is not available"
    await a.close()
    await h.close()
    assert h.closed and h.error is not None


async def test_deferred_job(broker):
    """Defer with a label; progress, a milestone, a partial result, a decision answered by the
    agent, interaction updates; the handler's return value completes the job."""
    handle = fresh("report")
    seen: asyncio.Queue = asyncio.Queue()

    async def render(call):
        assert call.deferrable and call.timeout == 10.0
        job = await call.defer(handle, "rendering the report")
        await seen.put(job)
        await job.progress("fetching data")
        await job.milestone("page 1 of 2 rendered")
        await job.partial({"pages": 2}, phase="layout")
        answer = await job.ask("Which format?", ["pdf", "html"], interaction_id="ia_format")
        await seen.put(answer)
        assert await job.update_interaction("ia_format", "resolved") == "already_closed"
        iid = await job.ask_nowait("Add a cover page?")
        assert iid.startswith("ia_")
        assert await job.update_interaction(iid, "cancelled") == "applied"
        assert await job.update_interaction(iid, "cancelled") == "already_closed"
        return {"url": f"https://example.com/{answer.option}"}

    start = time.time()
    h, a = await pair(broker, [Tool("render_report", render, deferred=True, deferred_timeout="1h")])
    r = await a.call("render_report", {"month": "may"})
    assert r.is_background and r.content == f"internal: true\n\nTool call `{r.call_id}` is running in the background."
    job = await get(seen)
    assert (job.handle, job.name, job.status_label, job.arguments) == (handle, "render_report", "rendering the report", {"month": "may"})
    assert start + 3600 - 5 < job.deadline_ms / 1000 < time.time() + 3600 + 5
    assert h.jobs[handle] is job
    p = await prompt_matching(a, lambda p: "asks" in p.text)
    assert p.text == f"Tool call `{r.call_id}` asks (ia_format): Which format?\nOptions: pdf, html" and not p.internal
    await a.answer_interaction("ia_format", "pdf please", option="pdf")
    answer = await get(seen)
    assert (answer.interaction_id, answer.option, answer.text) == ("ia_format", "pdf", "pdf please")
    w = await asyncio.wait_for(a.wait_result(r.call_id), WAIT)
    assert (w.kind, w.content) == ("result", '{"url":"https://example.com/pdf"}')
    with pytest.raises(CallFinishedError) as e:
        await job.fail("too late")
    assert e.value.code == "call_finished" and not e.value.retryable
    assert job.done and handle not in h.jobs  # the handler's result was confirmed before the fail
    await a.close()
    await h.close()


async def test_rejected_defer(broker):
    """Rejected defers raise DeferRejected with the broker's reason; the call stays pending,
    so the handler answers it."""
    handle = fresh("shared")
    outcomes: asyncio.Queue = asyncio.Queue()

    async def slow(call):
        try:
            job = await call.defer(call.arguments["handle"])
        except DeferRejected as e:
            await outcomes.put(e)
            return f"answered at once after {e.reason}"
        await outcomes.put(job)
        return None  # the job stays open; it is finished below

    async def quick(call):
        try:
            await call.defer(fresh("quick"))
        except DeferRejected as e:
            await outcomes.put(e)
        return "quick answer"

    h, a = await pair(broker, [Tool("slow", slow, deferred=True), Tool("quick", quick)])
    r = await a.call("slow", {"handle": "call_abcdefghij234567abcd"})
    assert (await get(outcomes)).reason == "handle_reserved"
    assert (await final(a, r)).content == "answered at once after handle_reserved"
    r1 = await a.call("slow", {"handle": handle})
    first = await get(outcomes)
    assert r1.is_background and first.handle == handle
    r2 = await a.call("slow", {"handle": handle})
    e = await get(outcomes)
    assert isinstance(e, DeferRejected) and e.reason == "handle_in_use" and e.handle == handle and e.call_id.startswith("call_")
    assert (await final(a, r2)).content == "answered at once after handle_in_use"
    await first.result("done")
    r3 = await a.call("slow", {"handle": handle})
    assert (await get(outcomes)).reason == "handle_burned"
    assert (await final(a, r3)).content == "answered at once after handle_burned"
    r4 = await a.call("quick")
    assert (await get(outcomes)).reason == "not_deferrable"
    assert (await final(a, r4)).content == "quick answer"
    r5 = await a.call("slow", {"handle": ""})
    assert (await get(outcomes)).reason == "invalid_handle"
    await final(a, r5)
    assert (await a.wait(r1.call_id)).content == "done"
    await a.close()
    await h.close()


async def test_cancel(broker):
    """The agent's cancel sets job.cancelled (agent_request) and cancels the handler's task; a
    result after it is refused; the host's own cancel_job cancels with host_request."""
    jobs: asyncio.Queue = asyncio.Queue()
    stopped: asyncio.Queue = asyncio.Queue()

    async def export(call):
        job = await call.defer(fresh("export"), "exporting")
        await jobs.put(job)
        try:
            await asyncio.sleep(60)  # the work; cancelled with the job
        except asyncio.CancelledError:
            await stopped.put(job.cancel_reason)
            raise

    h, a = await pair(broker, [Tool("export", export, deferred=True)])
    r = await a.call("export")
    job = await get(jobs)
    reasons = []
    job.on_cancel(reasons.append)
    c = await a.cancel(r.call_id)
    assert (c.kind, c.content) == ("result", "Tool cancellation requested")
    await asyncio.wait_for(job.cancelled.wait(), WAIT)
    assert job.cancel_reason == "agent_request" and await get(stopped) == "agent_request" and reasons == ["agent_request"]
    with pytest.raises(CallFinishedError):
        await job.result("too late")
    w = await a.wait(r.call_id)
    assert (w.kind, w.content) == ("error", "error: Tool call canceled")

    r3 = await a.call("export")
    job3 = await get(jobs)
    assert await h.cancel_job(job3.handle) == "cancelled"
    await asyncio.wait_for(job3.cancelled.wait(), WAIT)
    assert job3.cancel_reason == "host_request"
    assert await h.cancel_job(job3.call_id) == "already_canceled"
    assert await h.cancel_job(fresh("no-such-handle")) == "unknown_call"
    assert (await a.wait(r3.call_id)).error == "Tool call canceled"
    await a.close()
    await h.close()


async def test_deferred_timeout(broker):
    """A deferred job that reaches its deferred_timeout is cancelled with reason timeout, and
    the agent gets the timeout error (SPEC 5)."""
    jobs: asyncio.Queue = asyncio.Queue()

    async def slow(call):
        job = await call.defer(fresh("slow"))
        await jobs.put(job)
        await job.cancelled.wait()  # a worker that only stops when told
        return "never sent"

    h, a = await pair(broker, [Tool("slow", slow, deferred=True, deferred_timeout=1000)])
    r = await a.call("slow")
    job = await get(jobs)
    assert job.deadline_ms - time.time() * 1000 < 1500
    await asyncio.wait_for(job.cancelled.wait(), WAIT)
    assert job.cancel_reason == "timeout"
    w = await asyncio.wait_for(a.wait(r.call_id), WAIT)
    assert (w.kind, w.error) == ("error", "Tool call timed out")
    with pytest.raises(CallFinishedError):
        await job.progress("still here?")
    await a.close()
    await h.close()


async def test_frame_level_client(broker):
    """The frame-named methods of Client and its handlers, without the Host layer."""
    calls: asyncio.Queue = asyncio.Queue()
    answers: asyncio.Queue = asyncio.Queue()
    cancels: asyncio.Queue = asyncio.Queue()
    narrations = []
    c = Client(broker.url, role="host", api_key=broker.key,
               tools=[ToolDecl(name="book", description="Books", parameters={"type": "object"}, deferred=True)])
    c.on_tool_call(calls.put_nowait)
    c.on_tool_interaction_answer(answers.put_nowait)
    c.on_tool_cancel(cancels.put_nowait)
    c.on_tool_job_narration(narrations.append)
    w = await c.connect()
    assert w.session_id == c.session_id and c.join_token and c.url.endswith("/v1/ws")
    from backchannel import Agent
    a = await Agent.connect(broker.ws_url, session_id=c.session_id, join_token=c.join_token)
    r = await a.call("book", {"party": 4})
    tc = await get(calls)
    assert isinstance(tc, fr.ToolCall) and tc.arguments == {"party": 4} and tc.deferred and tc.seq >= 1
    handle = fresh("table")
    ack = await c.send_tool_deferred(tc.call_id, handle, status_label="booking")
    assert ack.accepted and ack.handle == handle and ack.deadline_ms > time.time() * 1000
    again = await c.send_tool_deferred(tc.call_id, handle, status_label="booking")
    assert again.accepted and again.deadline_ms == ack.deadline_ms  # a repeat is accepted again
    with pytest.raises(DeferRejected) as e:
        await c.send_tool_deferred(tc.call_id, fresh("other"))
    assert e.value.reason == "call_not_pending" and e.value.ack.accepted is False
    await c.send_tool_progress(handle, "calling the restaurant")
    await c.send_tool_partial_result(handle, "the restaurant has a table", reply=True)
    await c.send_tool_partial_result(handle, "7:30 or 8:15?",
                                     interaction=Interaction(prompt="7:30 or 8:15?", id="ia_time", options=["7:30", "8:15"]))
    p = await prompt_matching(a, lambda p: "asks" in p.text)
    assert p.text.endswith("asks (ia_time): 7:30 or 8:15?\nOptions: 7:30, 8:15")
    await a.answer_interaction("ia_time", "8:15 please")
    ans = await get(answers)
    assert (ans.interaction_id, ans.option, ans.text, ans.handle) == ("ia_time", "8:15", "8:15 please", handle)
    upd = await c.send_tool_interaction_update(handle, "ia_time", "resolved")
    assert (upd.result, upd.interaction_id, upd.state) == ("already_closed", "ia_time", "resolved")
    await c.send_tool_result(handle, output={"time": "8:15"})
    assert (await a.wait(r.call_id)).json() == {"time": "8:15"}
    with pytest.raises(CallFinishedError):
        await c.send_tool_result(tc.call_id, error="again")
    # A cancel of a pending call reaches on_tool_cancel.
    r2 = await a.call("book", {})
    tc2 = await get(calls)
    await a.cancel(r2.call_id)
    cancel = await get(cancels)
    assert (cancel.call_id, cancel.reason) == (tc2.call_id, "agent_request")
    assert narrations == []  # a text session narrates nothing
    await a.close()
    await c.close()


async def test_drop_and_resume(broker):
    """The host's connection is cut and the broker is out of reach while the agent makes a call
    and cancels a job: after the resume the cancel reaches the job, the call's handler runs
    once, a request made while away is sent, and the job finishes after the drop."""
    proxy = await Proxy(broker.port).start()
    jobs: asyncio.Queue = asyncio.Queue()
    runs: dict[str, int] = {}
    events: list[str] = []
    dropped, resumed = asyncio.Event(), asyncio.Event()

    async def export(call):
        job = await call.defer(fresh("export"), "exporting")
        await jobs.put(job)

    async def lookup(call):
        runs[call.call_id] = runs.get(call.call_id, 0) + 1
        return "looked up " + call.arguments["q"]

    h, a = await pair(broker, [Tool("export", export, deferred=True), Tool("lookup", lookup)],
                      url=proxy.ws_url, backoff=fast_backoff())

    def on_conn(ev):
        events.append(ev.kind)
        {"dropped": dropped, "resumed": resumed}.get(ev.kind, asyncio.Event()).set()
    h.client.on_connection(on_conn)
    r1 = await a.call("export")
    job1 = await get(jobs)
    r2 = await a.call("export")
    job2 = await get(jobs)
    seq_before = h.client.last_seq

    proxy.refuse = True
    proxy.cut()
    await asyncio.wait_for(dropped.wait(), WAIT)
    call3 = asyncio.ensure_future(a.call("lookup", {"q": "opening hours"}))
    c = await a.cancel(r1.call_id)
    assert c.content == "Tool cancellation requested"
    progress = asyncio.ensure_future(job2.progress("still exporting"))
    await asyncio.sleep(0.3)
    assert not progress.done() and not job1.cancelled.is_set()

    proxy.refuse = False
    await asyncio.wait_for(resumed.wait(), WAIT)
    await asyncio.wait_for(job1.cancelled.wait(), WAIT)
    assert job1.cancel_reason == "agent_request"
    await asyncio.wait_for(progress, WAIT)
    assert (await final(a, await asyncio.wait_for(call3, WAIT))).content == "looked up opening hours"
    await job2.result("exported")
    assert (await a.wait(r2.call_id)).content == "exported"
    assert list(runs.values()) == [1]
    assert h.client.last_seq > seq_before and events == ["dropped", "resumed"]
    await a.close()
    await h.close()
    await proxy.close()


async def test_errors(broker):
    """Broker refusals come back as the exceptions named after their codes."""
    with pytest.raises(UnauthorizedError) as e:
        await Host.connect(broker.ws_url, api_key="wrong")
    assert e.value.code == "unauthorized" and not e.value.retryable
    with pytest.raises(BadFrameError) as e:
        await Host.connect(broker.ws_url, api_key=broker.key, tools=[Tool("bad name!", lambda c: None)])
    assert "bad name!" in str(e.value) or "name" in e.value.message
    with pytest.raises(ValueError, match="session_id"):
        await Host.connect(broker.ws_url, join_token="x")
    with pytest.raises(ValueError, match="ws://"):
        await Host.connect("ftp://x", api_key="k")

    async def fine(call):
        return 1
    h = await Host.connect(broker.url, api_key=broker.key)
    with pytest.raises(BadFrameError, match="reserved"):
        await h.declare([Tool("wait", fine)])
    assert await h.declare([Tool("fine", fine)]) == ["fine"]
    from backchannel import Agent
    a = await Agent.connect(broker.ws_url, session_id=h.session_id, join_token=h.join_token)
    with pytest.raises(InjectRejectedError) as e:
        await h.inject("hello")  # a text session has no voice agent to speak it
    assert e.value.code == "inject_rejected"
    h2 = await Host.connect(broker.ws_url, session_id=h.session_id, join_token=h.join_token)
    assert h2.session_id == h.session_id
    await h2.close()
    await a.close()
    await h.close()


async def test_end(broker, tmp_path):
    """end() ends the session: every host stops with SessionEndedError, and the state file of
    the slot is removed."""
    state = str(tmp_path / "host.state")
    h = await Host.connect(broker.ws_url, api_key=broker.key, state_file=state)
    assert json.loads(open(state).read())["session_id"] == h.session_id
    assert oct(os.stat(state).st_mode & 0o777) == "0o600"
    other = await Host.connect(broker.ws_url, session_id=h.session_id, join_token=h.join_token)
    await asyncio.wait_for(h.end(), WAIT)
    err = await asyncio.wait_for(other.wait_closed(), WAIT)
    assert isinstance(err, SessionEndedError) and err.reason == "ended"
    assert isinstance(h.error, SessionEndedError) and not os.path.exists(state)
    with pytest.raises(SessionEndedError):
        await h.declare([])


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_resume_expired(store, start_broker, tmp_path):
    """A host kept away longer than the resume window is refused with resume_expired: it stops
    with ResumeExpiredError, its job was cancelled (discard), and its state file is removed."""
    b = start_broker(store, "--resume-window", "1s")
    proxy = await Proxy(b.port).start()
    state = str(tmp_path / "host.state")
    jobs: asyncio.Queue = asyncio.Queue()

    async def export(call):
        await jobs.put(await call.defer(fresh("export")))

    h = await Host.connect(proxy.ws_url, api_key=b.key, tools=[Tool("export", export, deferred=True)],
                           state_file=state, backoff=Backoff(initial=0.4, maximum=0.4, jitter=0.1, max_elapsed=20))
    from backchannel import Agent
    a = await Agent.connect(b.ws_url, session_id=h.session_id, join_token=h.join_token)
    r = await a.call("export")
    await get(jobs)
    proxy.refuse = True
    proxy.cut()
    await asyncio.sleep(1.6)  # past the slot's resume window
    proxy.refuse = False
    err = await asyncio.wait_for(h.wait_closed(), WAIT)
    assert isinstance(err, ResumeExpiredError) and err.code == "resume_expired" and not err.retryable
    assert not os.path.exists(state)
    w = await asyncio.wait_for(a.wait(r.call_id), WAIT)
    assert w.error == "Tool call canceled"  # discarded with the slot
    await a.close()
    await proxy.close()


def test_backoff_grows_with_jitter():
    lo = Backoff(initial=0.25, maximum=5, multiplier=2, jitter=0.5, random=lambda: 0.0).delays()
    hi = Backoff(initial=0.25, maximum=5, multiplier=2, jitter=0.5, random=lambda: 1.0).delays()
    assert [round(next(lo), 4) for _ in range(7)] == [0.125, 0.25, 0.5, 1.0, 2.0, 2.5, 2.5]
    assert [round(next(hi), 4) for _ in range(7)] == [0.375, 0.75, 1.5, 3.0, 6.0, 7.5, 7.5]


async def test_broker_restart_on_redis(start_broker):
    """A Redis broker node stopped with SIGTERM closes its connections with 1012 and keeps the
    session; a new node on the same Redis (here, on the same address) takes the host and the
    agent back, and the job deferred before the restart finishes after it."""
    b = start_broker("redis")
    jobs: asyncio.Queue = asyncio.Queue()

    async def export(call):
        await jobs.put(await call.defer(fresh("export")))

    h = await Host.connect(b.ws_url, api_key=b.key, tools=[Tool("export", export, deferred=True)], backoff=fast_backoff())
    from backchannel import Agent
    a = await Agent.connect(b.ws_url, session_id=h.session_id, join_token=h.join_token, backoff=fast_backoff())
    events: list[tuple[str, object]] = []
    h.on("connection", lambda ev: events.append((ev.kind, ev.error)))
    r = await a.call("export")
    job = await get(jobs)
    b.stop(graceful=True)  # SIGTERM: close 1012, nothing ended
    start_broker("redis", port=b.port)
    await job.progress("after the restart")  # waits for the resume, then is applied
    await job.result("exported across a restart")
    w = await asyncio.wait_for(a.wait_result(r.call_id), WAIT)
    assert w.body == "exported across a restart"  # (with duration_seconds: the stop takes a while)
    assert [k for k, _ in events] == ["dropped", "resumed"]
    assert getattr(events[0][1], "code", None) == 1012  # websockets' ConnectionClosed.code
    await a.close()
    await h.close()


async def test_voice_session_narrates_the_job(broker):
    """With a caller instead of a text agent, the scripted voice model calls the tool; the
    host's milestone, its decision (answered by the caller) and the completion are voiced, and
    the host follows each narration through on("tool_job_narration")."""
    import websockets

    narrations: list[tuple[str, str]] = []
    delivered = {k: asyncio.Event() for k in ("milestone", "interaction", "completion")}
    answers: asyncio.Queue = asyncio.Queue()

    async def book(call):
        job = await call.defer(fresh("table"), "booking your table")
        await job.milestone("the restaurant has a table")
        await delivered["milestone"].wait()
        answer = await job.ask("Seven thirty or eight fifteen?", ["seven thirty", "eight fifteen"])
        await answers.put(answer)
        return {"time": answer.option}

    def on_narration(f):
        narrations.append((f.kind, f.state))
        if f.state == "delivered":
            delivered[f.kind].set()

    h = await Host.connect(broker.ws_url, api_key=broker.key, tools=[Tool("book_table", book, deferred=True)])
    h.on("tool_job_narration", on_narration)
    async with websockets.connect(broker.ws_url, max_size=None, compression=None) as caller:
        await caller.send(json.dumps({"type": "hello", "protocol": "backchannel.v1", "role": "caller",
                                      "session_id": h.session_id, "join_token": h.join_token}))
        transcripts: asyncio.Queue = asyncio.Queue()

        async def read():
            async for msg in caller:
                if isinstance(msg, str):
                    f = json.loads(msg)
                    if f["type"] == "transcript" and f["role"] == "agent" and f["final"]:
                        await transcripts.put(f["text"])
        reader = asyncio.ensure_future(read())
        await caller.send(json.dumps({"type": "caller.text", "text": 'call book_table {"party":4}'}))

        async def said(prefix: str) -> str:
            while True:
                t = await get(transcripts)
                if t.startswith(prefix):
                    return t
        assert await said("Started booking your table in the background.")
        assert await said("Update on booking your table: the restaurant has a table")
        assert await said("Seven thirty or eight fifteen? Options: seven thirty, eight fifteen.")
        await asyncio.wait_for(delivered["interaction"].wait(), WAIT)  # the audio has been played
        await caller.send(json.dumps({"type": "caller.text", "text": "eight fifteen please"}))
        answer = await get(answers)
        assert (answer.option, answer.text) == ("eight fifteen", "eight fifteen please")
        assert await said('booking your table is done: {"time":"eight fifteen"}')
        await asyncio.wait_for(delivered["completion"].wait(), WAIT)
        reader.cancel()
    for kind in ("milestone", "interaction", "completion"):
        states = [s for k, s in narrations if k == kind]
        assert states[:3] == ["queued", "speaking", "delivered"], (kind, narrations)
    await h.close()


async def test_state_file_of_a_lost_slot(broker, tmp_path):
    """A state file whose slot the broker does not know raises, is removed, and the next connect
    starts afresh; a file that is not a state file is refused."""
    from backchannel import NotFoundError
    state = tmp_path / "host.state"
    state.write_text(json.dumps({"session_id": "sess_" + "a" * 20, "resume_token": "r" * 22, "last_seq": 7}))
    with pytest.raises(NotFoundError, match="state_file was removed"):
        await Host.connect(broker.ws_url, api_key=broker.key, state_file=str(state))
    assert not state.exists()
    h = await Host.connect(broker.ws_url, api_key=broker.key, state_file=str(state))
    assert json.loads(state.read_text())["session_id"] == h.session_id
    await h.close()
    assert json.loads(state.read_text())["resume_token"]  # close keeps the slot resumable
    bad = tmp_path / "bad.state"
    bad.write_text("not json")
    with pytest.raises(ValueError, match="not a state file"):
        await Host.connect(broker.ws_url, api_key=broker.key, state_file=str(bad))


async def test_frames_lost_in_a_drop(broker):
    """Frames written just before a drop never reach the broker. After the resume the sync
    barrier settles them: progress, a result and an answered request are sent again and
    succeed; a milestone, which could be narrated twice, raises UnconfirmedError."""
    from backchannel import UnconfirmedError
    proxy = await Proxy(broker.port).start()
    jobs: asyncio.Queue = asyncio.Queue()

    async def export(call):
        await jobs.put(await call.defer(fresh("export")))

    h, a = await pair(broker, [Tool("export", export, deferred=True)], url=proxy.ws_url, backoff=fast_backoff())
    r = await a.call("export")
    job = await get(jobs)
    proxy.lose = True
    progress = asyncio.ensure_future(job.progress("lost, then sent again"))
    milestone = asyncio.ensure_future(job.milestone("lost: narrated twice if repeated"))
    cancel = asyncio.ensure_future(h.cancel_job(fresh("nobody")))
    await asyncio.sleep(0.3)
    assert not (progress.done() or milestone.done() or cancel.done())
    proxy.lose = False
    proxy.cut()
    with pytest.raises(UnconfirmedError) as e:
        await asyncio.wait_for(milestone, WAIT)
    assert "tool_partial_result" in str(e.value) and not e.value.retryable
    await asyncio.wait_for(progress, WAIT)
    assert await asyncio.wait_for(cancel, WAIT) == "unknown_call"
    proxy.lose = True
    result = asyncio.ensure_future(job.result("sent twice, applied once"))
    await asyncio.sleep(0.3)
    proxy.lose = False
    proxy.cut()
    await asyncio.wait_for(result, WAIT)
    assert (await a.wait_result(r.call_id)).content == "sent twice, applied once"
    await a.close()
    await h.close()
    await proxy.close()
