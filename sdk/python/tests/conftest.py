"""Fixtures of the SDK's tests: a real `backchannel serve` (built once per run from this
checkout) on the memory store and on a private redis-server, and a runner for async tests.

No pytest plugin is needed: an ``async def`` test is run with asyncio.run by the hook below,
bounded by TEST_TIMEOUT seconds.
"""

import asyncio
import inspect
import logging
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SDK = HERE.parent
ROOT = SDK.parent.parent  # the checkout: sdk/python/tests -> sdk/python -> sdk -> root
sys.path.insert(0, str(SDK / "src"))

TEST_TIMEOUT = 60.0
STORES = ["memory", "redis"]

if os.environ.get("BACKCHANNEL_SDK_TEST_LOG"):
    logging.basicConfig(level=logging.DEBUG)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):  # type: ignore[no-untyped-def]
    """Runs ``async def`` tests in a fresh event loop (there is no pytest-asyncio here)."""
    fn = pyfuncitem.obj
    if not inspect.iscoroutinefunction(fn):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(asyncio.wait_for(fn(**args), TEST_TIMEOUT))
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="bc-pytest-")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def binary(workdir) -> str:
    """`go build -o <tmp>/backchannel ./cmd/backchannel` of this checkout, once per run."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not installed: install Go 1.26 (https://go.dev/doc/install) and put `go` on PATH; "
                    "the tests build the broker from this checkout")
    out = workdir / "backchannel"
    r = subprocess.run([go, "build", "-o", str(out), "./cmd/backchannel"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"go build ./cmd/backchannel failed:\n{r.stdout}{r.stderr}")
    return str(out)


class Redis:
    def __init__(self, workdir: pathlib.Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed: run `apt-get install -y redis-server`")
        self.port = free_port()
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / "redis.log").read_text(errors="replace") if (self.dir / "redis.log").exists() else ""
                self.stop()
                pytest.fail(f"redis-server on port {self.port} did not start:\n{log}")
            time.sleep(0.05)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture(scope="session")
def redis(workdir):
    """A private redis-server on a free loopback port, in a temporary directory."""
    r = Redis(workdir)
    yield r
    r.stop()


class Broker:
    """A `backchannel serve` process on a free port."""

    def __init__(self, binary: str, store: str, redis_url: str | None, workdir: pathlib.Path, *flags: str,
                 dev: bool = False, port: int | None = None) -> None:
        self.store = store
        port = port or free_port()
        args = [binary, "serve", "--addr", f"127.0.0.1:{port}", "--store", store]
        if not dev:  # dev: no --api-keys, so on loopback the tenant dev has the key dev
            args += ["--api-keys", "acme=key-a"]
        if store == "redis":
            args += ["--redis-url", redis_url or ""]
        args += list(flags)
        self.log_path = workdir / f"broker-{port}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")
        env = dict(os.environ, BACKCHANNEL_NODE_ID=f"pytest-{port}")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}/v1/ws"
        self.port = port
        self.key = "dev" if dev else "key-a"
        deadline = time.monotonic() + 20
        while "backchannel listening on" not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"backchannel serve did not start:\n{self.log_path.read_text(errors='replace')}")
            time.sleep(0.05)

    def stop(self, graceful: bool = False) -> None:
        """Stops the process: graceful sends SIGTERM and waits for its shutdown (a Redis node
        then closes its connections with 1012 and keeps the sessions); otherwise SIGKILL, as the
        tests' teardown needs nothing more."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


#: Flags of the shared brokers: calls go to the background after 1 s (SPEC 13's default is 2 s).
BROKER_FLAGS = ("--background-after", "1s", "--resume-window", "20s")


@pytest.fixture(scope="session")
def brokers(binary, redis, workdir):
    """One broker per store, shared by the tests of a run."""
    started: dict[str, Broker] = {}

    def get(store: str) -> Broker:
        if store not in started:
            started[store] = Broker(binary, store, redis.url if store == "redis" else None, workdir, *BROKER_FLAGS)
        return started[store]
    yield get
    for b in started.values():
        b.stop()


@pytest.fixture(params=STORES)
def broker(request, brokers) -> Broker:
    """The shared broker of each store: every test that takes it runs on both stores."""
    return brokers(request.param)


@pytest.fixture
def start_broker(binary, redis, workdir):
    """Starts a broker of its own: start_broker(store, *flags, dev=False, port=None)."""
    mine: list[Broker] = []

    def start(store: str, *flags: str, dev: bool = False, port: int | None = None) -> Broker:
        b = Broker(binary, store, redis.url if store == "redis" else None, workdir, *flags, dev=dev, port=port)
        mine.append(b)
        return b
    yield start
    for b in mine:
        b.stop()
