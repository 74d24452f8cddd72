# SPDX-License-Identifier: MIT
"""Text where SQLite's jobs table keeps times: the job is found, run, and the rows named.

SQLite stores whatever another program writes. A due time of 'tomorrow'
sorts after every number, so no claim ever found the row, and reading the
soonest due time raised ValueError in every idle worker's wait: one such
row stopped the whole queue. The rows here are written with sqlite3 straight
into the file, as a foreign program would.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue.drivers.database.sqlite import SQLiteQueue
from rainier_queue.envelope import QueuedJob

SHORT = timedelta(milliseconds=50)


def write(path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)


@pytest.fixture
async def queue(tmp_path: Path) -> SQLiteQueue:
    return SQLiteQueue(tmp_path / "jobs.db")


async def look_by_waiting(queue: SQLiteQueue) -> None:
    await queue.wait_for_work(["default"], SHORT)  # raised ValueError before


async def look_by_counting(queue: SQLiteQueue) -> None:
    await queue.counts("default")  # raised ValueError before; a drain decides by it


@pytest.mark.parametrize("value", ["tomorrow", b"\x00\x01"], ids=["text", "blob"])
@pytest.mark.parametrize("look", [look_by_waiting, look_by_counting], ids=["wait", "counts"])
async def test_a_due_time_that_is_not_a_number_is_repaired_and_the_job_runs(
    queue: SQLiteQueue,
    tmp_path: Path,
    value: object,
    look: Callable[[SQLiteQueue], Awaitable[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = QueuedJob.create("x", {"n": 1})
    other = QueuedJob.create("x", {"n": 2}, delay=timedelta(hours=1))
    await queue.push_many([job, other])
    write(tmp_path / "jobs.db", "UPDATE rainier_jobs SET due_at = ? WHERE id = ?", value, job.id)
    try:
        assert await queue.reserve("default") == []  # hidden from the claim, as before

        with caplog.at_level(logging.WARNING, logger="rainier_queue.sqlite"):
            await look(queue)

        counts = await queue.counts("default")
        assert (counts.waiting, counts.delayed) == (1, 1)
        [got] = await queue.reserve("default")
        assert got.job.id == job.id
        assert got.job.attempts == 1
        assert job.id in caplog.text
        assert "not a number" in caplog.text
        assert other.id not in caplog.text
    finally:
        await queue.aclose()


async def test_a_lease_that_cannot_end_is_released(queue: SQLiteQueue, tmp_path: Path) -> None:
    job = QueuedJob.create("x", {"n": 1})
    await queue.push(job)
    [held] = await queue.reserve("default")
    write(
        tmp_path / "jobs.db", "UPDATE rainier_jobs SET lease_until = 'never' WHERE id = ?", job.id
    )
    try:
        await queue.wait_for_work(["default"], SHORT)  # raised ValueError before

        [again] = await queue.reserve("default")
        assert again.job.id == job.id
        assert again.token != held.token
    finally:
        await queue.aclose()


async def test_a_healthy_table_is_left_alone(
    queue: SQLiteQueue, caplog: pytest.LogCaptureFixture
) -> None:
    await queue.push(QueuedJob.create("x", {"n": 1}, delay=timedelta(hours=1)))
    try:
        with caplog.at_level(logging.WARNING, logger="rainier_queue.sqlite"):
            await queue.wait_for_work(["default"], SHORT)
        assert caplog.text == ""
        assert (await queue.counts("default")).delayed == 1
    finally:
        await queue.aclose()
