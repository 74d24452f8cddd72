# SPDX-License-Identifier: MIT
"""Envelopes for contract tests, built directly: the suite tests drivers, not dispatch."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import Queue, Reservation


def a_job(
    *,
    name: str = "contract-job",
    payload: Any = None,
    queue: str = "default",
    delay: timedelta | None = None,
    max_attempts: int = 3,
    headers: dict[str, str] | None = None,
) -> QueuedJob:
    return QueuedJob.create(
        name, payload, queue=queue, max_attempts=max_attempts, delay=delay, headers=headers
    )


async def reserve_one(queue: Queue, name: str = "default") -> Reservation:
    """Reserve exactly one job, failing the test if there is none."""
    got = await queue.reserve(name)
    assert len(got) == 1, f"expected one job on {name!r}, got {len(got)}"
    return got[0]


async def reserve_eventually(
    queue: Queue, name: str = "default", *, within: timedelta = timedelta(seconds=5)
) -> Reservation:
    """Poll until a job is handed out (for jobs that become due later)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within.total_seconds()
    while True:
        got = await queue.reserve(name)
        if got:
            return got[0]
        if loop.time() > deadline:
            raise AssertionError(f"no job became available on {name!r} within {within}")
        await asyncio.sleep(0.02)
