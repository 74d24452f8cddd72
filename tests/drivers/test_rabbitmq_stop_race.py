# SPDX-License-Identifier: MIT
"""RabbitMQ: a worker that stops while the broker is still filling its window costs no job a try.

A quorum queue hands a consumer a new job for each acknowledgement it
applies. A worker that acknowledges its last jobs and cancels its consumer
at once races those hand-outs: RabbitMQ 3.10 checks a job out to the
consumer, the channel drops it as the consumer is cancelled, and the queue
takes it back counting a delivery (`x-delivery-count` 1) that no client
ever saw (bench/studies/amqp_cancel_race.py measures it). A job with one
try is then failed unrun by the next worker. The driver lets the window
fill, or go quiet, before it cancels (consuming.py), so the test stops
workers in the middle of that flow, cycle after cycle, and asserts every
job is handed out once, on its first attempt.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rainier_queue.drivers.rabbitmq import RabbitMQQueue

from ..contract.backends import BACKENDS
from ..contract.jobs import a_job

pytestmark = pytest.mark.timeout(240)

CYCLES = 20
JOBS = 2_000
"""Enough that every cycle stops with jobs still queued behind its window."""


@pytest.fixture
async def opener(tmp_path: Path) -> AsyncIterator[Callable[[], RabbitMQQueue]]:
    """Queue objects on one namespace of their own, closed and removed after."""
    backend = BACKENDS["rabbitmq"]
    assert backend.check is not None
    assert backend.cleanup is not None
    backend.check()
    namespace = "rq" + uuid.uuid4().hex[:12]
    backend.setup(tmp_path, namespace, ["default"])
    opened: list[RabbitMQQueue] = []

    def open_one() -> RabbitMQQueue:
        queue = backend.open(tmp_path, namespace)
        assert isinstance(queue, RabbitMQQueue)
        opened.append(queue)
        return queue

    try:
        yield open_one
    finally:
        for queue in opened:
            await queue.aclose()
        await backend.cleanup(tmp_path, namespace)


async def test_a_worker_stopping_mid_flow_costs_no_job_a_try(
    opener: Callable[[], RabbitMQQueue],
) -> None:
    first = opener()
    await first.push_many([a_job(payload={"n": n}) for n in range(JOBS)])
    runs: Counter[str] = Counter()
    late: list[tuple[int, str, int]] = []
    for cycle in range(CYCLES):
        queue = opener()
        queue.on_worker_start()
        settled = 0
        wanted = 20 + 7 * cycle % 50  # stop at a different point of the flow each cycle
        while settled < wanted:
            got = await queue.reserve("default", limit=min(64, wanted - settled))
            assert got, "a worker's reserve found nothing with jobs left"
            for reservation in got:
                if reservation.job.attempts != 1:
                    late.append((cycle, reservation.job.id, reservation.job.attempts))
                runs[reservation.job.id] += 1
                await queue.acknowledge(reservation)  # the flow goes on: the window refills
            settled += len(got)
        await queue.on_worker_stop()  # straight after the last acknowledgements
        await queue.aclose()
    assert late == [], "jobs came back counted as delivered though no worker ran them"
    assert max(runs.values()) == 1
    # Nothing was lost on the way: the rest are all there, each on its first try.
    rest = opener()
    left = 0
    while got := await rest.reserve("default", limit=100):
        for reservation in got:
            assert reservation.job.attempts == 1, "a job left behind was counted unrun"
            assert reservation.job.id not in runs
            await rest.acknowledge(reservation)
            left += 1
    assert left + sum(runs.values()) == JOBS
