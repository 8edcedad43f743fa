"""A small Backchannel host: it serves one deferred tool, render_report, that defers every
call, reports progress twice and completes a few seconds later.

    go run ./cmd/backchannel serve                      # in another terminal
    PYTHONPATH=sdk/python/src python3 sdk/python/examples/host.py --key dev --state host.state

It logs the session id and join token; make a call as a text agent with
`go run ./cmd/backchannel call -session SESSION -token TOKEN render_report '{"month":"june"}'`.
Kill it (even with kill -9) while the job runs and start it again with the same --state: it
resumes its slot, gets the job back from tool_deferred_resume, and finishes it.
"""

import argparse
import asyncio
import logging
import signal

from backchannel import Host, Tool

log = logging.getLogger("example")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="ws://127.0.0.1:8080/v1/ws", help="broker WebSocket URL")
    p.add_argument("--key", help="API key: creates a session, or attaches to --session")
    p.add_argument("--session", help="session to attach to (with --key or --token)")
    p.add_argument("--token", help="join token of --session")
    p.add_argument("--state", help="file keeping {session_id, resume_token, last_seq}: a restarted host resumes its slot")
    p.add_argument("--work-seconds", type=float, default=4.0, help="how long rendering a report takes")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(serve(args))


async def serve(args: argparse.Namespace) -> None:
    async def render_report(call):
        # A handle derived from the call id is fresh for every call, and the same again if the
        # call is replayed to a restarted host (a repeated defer is accepted again).
        job = await call.defer("report-" + call.call_id[len("call_"):], "rendering your report")
        for note in ("fetching the numbers", "laying out the pages"):
            await job.progress(note)
            await asyncio.sleep(args.work_seconds / 2)
        return {"url": f"https://reports.example.com/{job.handle}.pdf"}  # completes the job

    async def resumed(job, info):
        # After a restart (--state), jobs deferred by the previous process come back here.
        log.info("resumed job %s; finishing it", job.handle)
        await job.progress("picking up where the last process stopped")
        await asyncio.sleep(args.work_seconds / 2)
        return {"url": f"https://reports.example.com/{job.handle}.pdf"}

    tool = Tool("render_report", render_report, description="Renders the monthly report as a PDF",
                parameters={"type": "object", "properties": {"month": {"type": "string"}}},
                deferred=True, expected_duration="minutes")
    host = await Host.connect(args.url, api_key=args.key, session_id=args.session, join_token=args.token,
                              state_file=args.state, tools=[tool], on_resume=resumed)
    log.info("serving render_report in session %s (join token %s)", host.session_id, host.join_token)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(host.close()))
    err = await host.wait_closed()
    log.info("stopped: %s", err)


if __name__ == "__main__":
    main()
