# SPDX-License-Identifier: MIT
"""Jobs with known outcomes, for the metrics tests' worker processes.

Loaded by `rainier-queue --app tests.telemetry.metrics_app:registry work`:
each job's name says what it does, so a workload of them gives counts the
test can state exactly.
"""

from __future__ import annotations

from datetime import timedelta

from rainier_queue import Job, JobContext, JobRegistry


class Fine(Job):
    """Succeeds on its first attempt."""

    name = "fine"

    def handle(self, ctx: JobContext) -> None:
        return None


class Flaky(Job):
    """Fails its first attempt and succeeds on its second."""

    name = "flaky"
    tries = 2

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)

    def handle(self, ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")


class Doomed(Job):
    """Fails both its attempts: one retry, then the failed store."""

    name = "doomed"
    tries = 2

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)

    def handle(self, ctx: JobContext) -> None:
        raise RuntimeError("this job always fails")


registry = JobRegistry([Fine, Flaky, Doomed])
