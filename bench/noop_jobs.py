# SPDX-License-Identifier: MIT
"""The benchmark's job: does nothing, so what is measured is the queue itself."""

from __future__ import annotations

import sys

from rainier_queue import Job, JobContext, JobRegistry


class Noop(Job):
    name = "bench-noop"
    tries = 1
    n: int

    async def handle(self, ctx: JobContext) -> None:
        return None


registry = JobRegistry([Noop])


def drain_command(url: str, concurrency: int, *, quiet: bool = False) -> list[str]:
    """One CLI worker that works these jobs from `url` until the queue is empty."""
    return [
        *(sys.executable, "-m", "rainier_queue", "--app", "bench.noop_jobs:registry"),
        *("--url", url, *(["--quiet"] if quiet else []), "work", "--stop-when-empty"),
        *("--concurrency", str(concurrency)),
    ]
