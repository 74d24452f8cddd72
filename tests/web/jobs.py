# SPDX-License-Identifier: MIT
"""Jobs the dashboard tests put on queues: one that fails until told not to, and one whose
payload and error are hostile HTML."""

from __future__ import annotations

from rainier_queue import Job, JobContext, JobRegistry

QUEUE = "web"

FAILING: set[str] = set()
"""The keys of `Toggle` jobs that fail when run: a test adds one, then lets it succeed."""


class Toggle(Job):
    name = "toggle"
    queue = QUEUE
    tries = 1

    key: str

    async def handle(self, ctx: JobContext) -> None:
        if self.key in FAILING:
            raise RuntimeError(f"toggle {self.key} fails while the test says so")


SCRIPT = "<script>window.__pwned = true; alert('payload')</script>"
IMAGE = "<img src=x onerror=\"window.__pwned = true; alert('error')\">"


class Hostile(Job):
    name = "hostile"
    queue = QUEUE
    tries = 1

    text: str = SCRIPT
    password: str = ""
    dsn: str = ""

    async def handle(self, ctx: JobContext) -> None:
        raise RuntimeError(f"refused {IMAGE}")


def registry() -> JobRegistry:
    return JobRegistry([Toggle, Hostile])
