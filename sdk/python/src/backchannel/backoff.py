"""Exponential backoff with jitter for reconnecting (SPEC 15)."""

import random
from dataclasses import dataclass
from typing import Callable, Iterator

__all__ = ["Backoff"]


@dataclass
class Backoff:
    """The reconnect policy of a Host, Agent or Client.

    After a drop the first attempt is immediate; each later attempt waits the current interval,
    randomized by ±``jitter`` (0.5: anywhere from half to one and a half times it), and the
    interval grows by ``multiplier`` from ``initial`` up to ``maximum`` seconds. Attempts stop
    once ``max_elapsed`` seconds have passed since the drop — None means the resume window the
    broker announced in its welcome (after it the slot cannot be resumed anyway). ``random`` is
    the source of jitter (injectable for tests).
    """

    initial: float = 0.25
    maximum: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.5
    max_elapsed: float | None = None
    random: Callable[[], float] = random.random

    def delays(self) -> Iterator[float]:
        """The waits before the second, third, … attempt (unbounded; the caller stops on
        max_elapsed)."""
        interval = self.initial
        while True:
            r = self.random()
            lo, hi = interval * (1 - self.jitter), interval * (1 + self.jitter)
            yield lo + r * (hi - lo)
            interval = min(self.maximum, interval * self.multiplier)
