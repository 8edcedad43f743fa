"""The Python host of the READMEs runs as written: against `serve` in its dev mode (loopback, no
--api-keys: key dev), with only the port changed, and `backchannel call` as the text agent, as
the README tells. Killed with SIGKILL mid-job and started again in the same directory, it
resumes from host.state and the agent gets the job's result."""

import asyncio
import json
import os
import re
import signal
import subprocess
import sys

from conftest import ROOT, SDK
from test_example import Example

SECTION = "## A host in Python"


def python_block(path) -> str:
    text = path.read_text()
    assert SECTION in text, f"{path} has no section {SECTION!r}"
    m = re.search(r"```python\n(.*?)```", text.split(SECTION, 1)[1], re.S)
    assert m, f"{path} has no python block under {SECTION!r}"
    return m.group(1)


def test_readmes_show_the_same_host():
    assert python_block(ROOT / "README.md") == python_block(SDK / "README.md")


async def test_readme_host_runs_as_written(start_broker, binary, tmp_path):
    code = python_block(SDK / "README.md")
    assert 'Host.connect("ws://127.0.0.1:8080/v1/ws", api_key="dev", state_file="host.state"' in code
    b = start_broker("memory", dev=True)
    (tmp_path / "host.py").write_text(code.replace("127.0.0.1:8080", f"127.0.0.1:{b.port}"))

    async def start_host() -> Example:
        proc = await asyncio.create_subprocess_exec(sys.executable, "host.py", cwd=tmp_path,
                                                    env=dict(os.environ, PYTHONPATH=str(SDK / "src")),
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        return Example(proc)

    host = await start_host()
    session, token = (await host.line(r"session (sess_\S+) join token (\S+)")).groups()
    call = await asyncio.create_subprocess_exec(binary, "call", "-url", b.url, "-session", session, "-token", token,
                                                "-timeout", "40s", "render_report", '{"month":"june"}',
                                                stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT)
    state = tmp_path / "host.state"
    for _ in range(200):
        if state.exists() and json.loads(state.read_text())["last_seq"] >= 3:
            break
        await asyncio.sleep(0.05)
    assert json.loads(state.read_text())["session_id"] == session
    assert await host.stop(signal.SIGKILL) == -signal.SIGKILL  # mid-job: the work takes 3 s

    again = await start_host()
    try:
        assert (await again.line(r"session (sess_\S+) join token")).group(1) == session
        out, _ = await asyncio.wait_for(call.communicate(), 30)
        text = out.decode()
        assert call.returncode == 0, text
        assert re.search(r"https://reports\.example\.com/report-[a-z2-7]{20}\.pdf", text), text
    finally:
        await again.stop()
