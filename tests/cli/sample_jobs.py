# SPDX-License-Identifier: MIT
"""Jobs for the CLI tests, loaded by the CLI process with `--app tests.cli.sample_jobs:registry`.

They talk to the test through files named in their payload, since the test
and the worker are different processes.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from rainier_queue import Job, JobContext, JobRegistry, QueueConfig, QueueManager


class Note(Job):
    """Succeeds; appends its text to `path` when given one."""

    name = "note"
    text: str
    path: str = ""

    def handle(self, ctx: JobContext) -> None:
        if self.path:
            with Path(self.path).open("a", encoding="utf-8") as out:
                out.write(self.text + "\n")


class Boom(Job):
    """Always fails, on its only attempt."""

    name = "boom"
    tries = 1
    reason: str = "the card was declined"

    def handle(self, ctx: JobContext) -> None:
        raise RuntimeError(self.reason)


class Slow(Job):
    """Writes `started` to `path`, takes `seconds`, then writes `finished`.

    With `naps`, it sleeps in 10 ms naps, so the exception a worker raises in
    its thread at a stop ends it between two (a single long sleep gets it
    only when the sleep ends).
    """

    name = "slow"
    tries = 1
    path: str
    seconds: float = 1.0
    naps: bool = False

    def handle(self, ctx: JobContext) -> None:
        marker = Path(self.path)
        with marker.open("a", encoding="utf-8") as out:
            out.write("started\n")
        if self.naps:
            until = time.monotonic() + self.seconds
            while time.monotonic() < until:
                time.sleep(0.01)
        else:
            time.sleep(self.seconds)
        with marker.open("a", encoding="utf-8") as out:
            out.write("finished\n")


class FailsFirst(Job):
    """Fails its first attempt, then succeeds; waits `retry_after` seconds between."""

    name = "fails-first"
    tries = 3
    path: str
    retry_after: float = 1.0

    def handle(self, ctx: JobContext) -> None:
        with Path(self.path).open("a", encoding="utf-8") as out:
            out.write(f"attempt {ctx.attempt}\n")
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails on purpose")

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(seconds=self.retry_after)


registry = JobRegistry([Note, Boom, Slow, FailsFirst])


class OncePerOrder(Job):
    """A unique job: one waiting per order."""

    name = "once-per-order"
    order_id: int

    def unique_id(self) -> str:
        return str(self.order_id)

    def handle(self, ctx: JobContext) -> None:
        return None


unique_registry = JobRegistry([Note, OncePerOrder])


def manager() -> QueueManager:
    """A factory returning a manager with its own connection (`--app ...:manager`)."""
    return QueueConfig.from_url(os.environ["RAINIER_QUEUE_TEST_URL"]).build(registry)
