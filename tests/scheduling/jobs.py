# SPDX-License-Identifier: MIT
"""Jobs the scheduler tests enqueue."""

from __future__ import annotations

from rainier_queue import Job, JobContext, JobRegistry


class Report(Job):
    name = "report"
    queue = "reports"

    team: str = "ops"

    async def handle(self, ctx: JobContext) -> None:
        return None


class Purge(Job):
    name = "purge"

    async def handle(self, ctx: JobContext) -> None:
        return None


def registry() -> JobRegistry:
    return JobRegistry([Report, Purge])
