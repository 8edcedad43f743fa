"""examples/host.py as a real process against the fixture's broker: it serves a call end to end,
and — killed with SIGKILL mid-job and started again from its state file — it resumes its slot
and finishes the job, which the agent then gets through wait."""

import asyncio
import json
import os
import re
import signal
import sys

from backchannel import Agent
from conftest import SDK
from helpers import WAIT

EXAMPLE = SDK / "examples" / "host.py"
SERVING = re.compile(r"serving render_report in session (\S+) \(join token (\S+)\)")


class Example:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, *args: str) -> "Example":
        env = dict(os.environ, PYTHONPATH=str(SDK / "src"))
        proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLE), *args, env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.lines.append(line.decode(errors="replace"))

    async def line(self, pattern: re.Pattern | str) -> re.Match:
        """The first output line matching pattern (waiting for it)."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        for _ in range(int(WAIT / 0.05)):
            for ln in self.lines:
                if m := rx.search(ln):
                    return m
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"no line matching {rx.pattern!r} in the example's output:\n{''.join(self.lines)}")

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        rc = await asyncio.wait_for(self.proc.wait(), WAIT)
        await self._reader
        return rc


async def test_example_serves_a_call(broker):
    ex = await Example.start("--url", broker.ws_url, "--key", broker.key, "--work-seconds", "0.4")
    try:
        session, token = (await ex.line(SERVING)).groups()
        a = await Agent.connect(broker.ws_url, session_id=session, join_token=token)
        r = await a.call("render_report", {"month": "june"})
        assert r.is_background
        w = await asyncio.wait_for(a.wait_result(r.call_id), WAIT)
        handle = "report-" + _broker_call_id(w.json()["url"])
        assert w.json() == {"url": f"https://reports.example.com/{handle}.pdf"}
        await a.close()
    finally:
        rc = await ex.stop()
    assert rc == 0, "".join(ex.lines)


def _broker_call_id(url: str) -> str:
    m = re.fullmatch(r"https://reports\.example\.com/report-([a-z2-7]{20})\.pdf", url)
    assert m, url
    return m.group(1)


async def test_example_killed_mid_job_resumes_from_state_file(broker, tmp_path):
    state = tmp_path / "host.state"
    first = await Example.start("--url", broker.ws_url, "--key", broker.key, "--state", str(state), "--work-seconds", "60")
    session, token = (await first.line(SERVING)).groups()
    a = await Agent.connect(broker.ws_url, session_id=session, join_token=token)
    r = await a.call("render_report", {"month": "july"})
    assert r.is_background
    # Once the state file holds the tool_deferred_ack (tools.declared 1, tool_call 2, ack 3),
    # the process dies mid-job, without a chance to close anything.
    for _ in range(int(WAIT / 0.05)):
        if state.exists() and json.loads(state.read_text())["last_seq"] >= 3:
            break
        await asyncio.sleep(0.05)
    saved = json.loads(state.read_text())
    assert saved["session_id"] == session and saved["last_seq"] >= 3 and saved["resume_token"]
    assert await first.stop(signal.SIGKILL) == -signal.SIGKILL

    second = await Example.start("--url", broker.ws_url, "--state", str(state), "--work-seconds", "0.4")
    try:
        assert (await second.line(SERVING)).group(1) == session
        handle = (await second.line(r"resumed job (report-[a-z2-7]{20}); finishing it")).group(1)
        w = await asyncio.wait_for(a.wait_result(r.call_id), WAIT)
        assert (w.kind, w.json()) == ("result", {"url": f"https://reports.example.com/{handle}.pdf"})
        assert json.loads(state.read_text())["resume_token"] != saved["resume_token"]  # rotated on resume
        await a.close()
    finally:
        rc = await second.stop()
    assert rc == 0, "".join(second.lines)


async def test_example_restarted_from_a_stale_state_file(broker, tmp_path):
    """The process dies before its state file saved the tool_call (the file is written lazily):
    the restarted process sees the call replayed, its handler defers it again under the same
    handle — accepted again — and finishes it; the job is not handed to on_resume as well."""
    state = tmp_path / "host.state"
    first = await Example.start("--url", broker.ws_url, "--key", broker.key, "--state", str(state), "--work-seconds", "60")
    session, token = (await first.line(SERVING)).groups()
    for _ in range(int(WAIT / 0.05)):
        if state.exists() and json.loads(state.read_text())["last_seq"] >= 1:  # tools.declared
            break
        await asyncio.sleep(0.05)
    stale = state.read_text()
    assert json.loads(stale)["last_seq"] == 1
    a = await Agent.connect(broker.ws_url, session_id=session, join_token=token)
    r = await a.call("render_report", {"month": "august"})
    assert r.is_background
    assert await first.stop(signal.SIGKILL) == -signal.SIGKILL
    state.write_text(stale)  # as if the kill came before the lazy save

    second = await Example.start("--url", broker.ws_url, "--state", str(state), "--work-seconds", "0.4")
    try:
        assert (await second.line(SERVING)).group(1) == session
        w = await asyncio.wait_for(a.wait_result(r.call_id), WAIT)
        assert w.kind == "result" and w.json()["url"].startswith("https://reports.example.com/report-")
        assert not any("resumed job" in ln for ln in second.lines), "".join(second.lines)
        await a.close()
    finally:
        rc = await second.stop()
    assert rc == 0, "".join(second.lines)
