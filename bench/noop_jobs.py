# SPDX-License-Identifier: MIT
"""The benchmark's job: does nothing, so what is measured is the queue itself."""

from __future__ import annotations

from rainier_queue import Job, JobContext, JobRegistry


class Noop(Job):
    name = "bench-noop"
    tries = 1
    n: int

    async def handle(self, ctx: JobContext) -> None:
        return None


registry = JobRegistry([Noop])
