# SPDX-License-Identifier: MIT
"""`retry_all_failed`: the walk `retry --all` and the dashboard's "retry all that match" share."""

from __future__ import annotations

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.failed_retries import retry_all_failed
from rainier_queue.queue import FailedJobStore


async def test_only_the_jobs_kept_by_the_filter_go_back_each_once() -> None:
    queue = open_queue("memory://")
    assert isinstance(queue, FailedJobStore)
    try:
        names = ["mail", "mail", "report"]
        await queue.push_many([QueuedJob.create(name, {}) for name in names])
        for reservation in await queue.reserve("default", limit=3):
            await queue.fail(reservation, "boom")

        mails = await retry_all_failed(queue, keep=lambda f: f.job.name == "mail")

        assert mails == 2
        assert [f.job.name for f in await queue.failed_jobs()] == ["report"]
        assert await queue.size("default") == 2
        assert await retry_all_failed(queue, queue="other") == 0
        assert await retry_all_failed(queue) == 1
        assert await queue.failed_jobs() == []
    finally:
        await queue.aclose()
