# SPDX-License-Identifier: MIT
"""The inline (`sync`) driver, whose one capability is the opposite: it is not deferred."""

from __future__ import annotations

import pytest

from rainier_queue import Job, JobContext, JobRegistry
from rainier_queue.drivers import DriverContext, open_queue

from .jobs import a_job

ran: list[int] = []


class Record(Job):
    name = "record"
    value: int

    async def handle(self, ctx: JobContext) -> None:
        if self.value < 0:
            raise ValueError("negative")
        ran.append(self.value)


async def test_the_sync_driver_runs_the_job_inside_push_and_errors_reach_the_caller() -> None:
    queue = open_queue("sync://", {}, DriverContext(registry=JobRegistry([Record])))
    assert not queue.capabilities.deferred

    await queue.push(a_job(name="record", payload={"value": 3}))
    with pytest.raises(ValueError, match="negative"):
        await queue.push(a_job(name="record", payload={"value": -1}))

    assert ran == [3]
    assert await queue.reserve("default") == []
    assert await queue.size("default") == 0
