# SPDX-License-Identifier: MIT
"""What a job class may declare as its limits, and what a dispatch carries of them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rainier_queue import Job, JobContext, QueueManager, job
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.job import LIMIT_KEY, parse_rate
from rainier_queue.limits import Limits, limits_of


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [
        ("100/m", 100, 60),
        ("5/s", 5, 1),
        ("1000/h", 1000, 3600),
        ("10/30s", 10, 30),
        ("2/d", 2, 86400),
    ],
)
def test_a_rate_reads_as_a_count_per_period(text: str, count: int, seconds: float) -> None:
    assert parse_rate(text) == (count, timedelta(seconds=seconds))


@pytest.mark.parametrize("text", ["100", "0/s", "-1/m", "x/m", "5/w", "5/0s", "5/", "/m"])
def test_a_bad_rate_is_refused_saying_what_a_rate_looks_like(text: str) -> None:
    with pytest.raises(ValueError, match=r"COUNT/PERIOD, such as 100/m"):
        parse_rate(text)


def test_a_class_with_a_bad_limit_is_refused_when_it_is_defined() -> None:
    with pytest.raises(TypeError, match=r"Fast.rate_limit: a rate is COUNT/PERIOD"):

        class Fast(Job):
            name = "fast"
            rate_limit = "lots"

    with pytest.raises(TypeError, match=r"Wide.concurrency_limit must be a whole number"):

        class Wide(Job):
            name = "wide"
            concurrency_limit = 0


class PerTenant(Job):
    name = "per-tenant"
    rate_limit = "10/s"
    concurrency_limit = 2
    tenant: str

    def limit_key(self) -> str | None:
        return None if self.tenant == "free" else f"tenant:{self.tenant}"

    async def handle(self, ctx: JobContext) -> None:
        return None


class Plain(Job):
    name = "plain"

    async def handle(self, ctx: JobContext) -> None:
        return None


@job(name="ping-partner", rate_limit="5/s")
async def ping_partner(url: str) -> None:
    return None


def test_limits_are_read_from_the_class_and_a_function_job() -> None:
    assert limits_of(PerTenant) == Limits((10, timedelta(seconds=1)), 2)
    assert limits_of(ping_partner.job_class) == Limits((5, timedelta(seconds=1)), None)
    assert limits_of(Plain) is None


async def test_a_dispatch_carries_the_limit_key_and_nothing_for_an_unlimited_job() -> None:
    queue = MemoryQueue()
    manager = QueueManager(queue)
    await manager.dispatch(PerTenant(tenant="7"))
    await manager.dispatch(PerTenant(tenant="free"))
    await manager.dispatch(ping_partner(url="https://example.invalid"))
    await manager.dispatch(Plain())

    reserved = await queue.reserve("default", limit=4)
    headers = [r.job.headers for r in reserved]
    assert headers == [{LIMIT_KEY: "tenant:7"}, {}, {LIMIT_KEY: "ping-partner"}, {}]
