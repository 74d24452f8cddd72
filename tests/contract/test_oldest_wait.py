# SPDX-License-Identifier: MIT
"""The age of a queue's oldest due job (`OldestWaiting`), and the depth metrics, both ways.

A driver that declares it must say how long the job due longest ago and
not yet reserved has been due, counting neither delayed jobs nor reserved
ones; the queue-depth metrics then show it. When a job fell due is the
driver's record of it (the server databases take their own clock's time
for a job due at once when it is pushed), so the ages here are bounded,
not exact. A driver that does not declare
it must be left without the metric, never given a made-up age; likewise
the counts by state, shown only for a driver that can count (`Countable`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="the metrics come with the prometheus extra")

from prometheus_client import CollectorRegistry

from rainier_queue.queue import Countable, OldestWaiting, Queue
from rainier_queue.telemetry.depth import DepthCollector

from .backends import Backend
from .jobs import a_job, reserve_one

AGE_METRIC = "rainier_queue_queue_oldest_job_age_seconds"


async def test_the_oldest_wait_is_the_earliest_due_free_job_s(
    backend: Backend, tmp_path: Path, namespace: str, queue: Queue
) -> None:
    if not isinstance(queue, OldestWaiting):
        pytest.skip(f"{backend.name} cannot tell its oldest job's age (tested the other way)")
    backend.setup(tmp_path, namespace, ["default"])
    assert await queue.oldest_wait("default") is None
    await queue.push(a_job(delay=timedelta(hours=5)))
    assert await queue.oldest_wait("default") is None  # a delayed job does not wait yet
    await queue.push(a_job())
    await queue.push(a_job())
    for _ in range(2):
        waited = await queue.oldest_wait("default")
        assert waited is not None
        assert timedelta(0) <= waited < timedelta(hours=1)  # pushed within this test
        await reserve_one(queue)
    assert await queue.oldest_wait("default") is None  # reserved jobs do not wait


async def test_the_depth_metrics_show_counts_and_ages_only_where_the_driver_tells_them(
    backend: Backend, tmp_path: Path, namespace: str, queue: Queue
) -> None:
    backend.setup(tmp_path, namespace, ["default"])
    await queue.push(a_job())
    registry = CollectorRegistry()
    DepthCollector(queue, ["default"], asyncio.get_running_loop(), registry)
    # A scrape runs on the HTTP server's thread and sends its reads to the queue's loop.
    ages = await asyncio.to_thread(
        lambda: registry.get_sample_value(AGE_METRIC, {"queue": "default"})
    )
    depth = await asyncio.to_thread(
        lambda: registry.get_sample_value("rainier_queue_queue_depth", {"queue": "default"})
    )
    waiting = await asyncio.to_thread(
        lambda: registry.get_sample_value(
            "rainier_queue_queue_jobs", {"queue": "default", "state": "waiting"}
        )
    )
    assert depth == 1
    if isinstance(queue, Countable):
        assert waiting == 1
    else:
        assert waiting is None, f"{backend.name} does not declare Countable, so no count is shown"
    if isinstance(queue, OldestWaiting):
        assert ages is not None
        assert 0 <= ages < 3600
    else:
        assert ages is None, f"{backend.name} does not declare OldestWaiting, so no age is shown"
