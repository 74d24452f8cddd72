# SPDX-License-Identifier: MIT
"""RabbitMQ: a worker's reserves consume; a script's reserve holds exactly what it was handed.

A busy worker reserves again and again. Asked of the broker one `basic.get`
a job, that held a worker to a few hundred jobs a second, so once a worker
says it starts (`Queue.on_worker_start`), a reserve consumes and takes what
the broker pushed. A reserve from anything else (a script, a command) still
takes its jobs one by one and has nothing pushed to it afterwards, so
`size` counts what is on the broker. And while the jobs it hands out are
settled quickly, a worker's window widens past its slots (window.py).
"""

from __future__ import annotations

import asyncio

import pytest

from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.drivers.rabbitmq.window import HOLD_BOUND, QUICK_WINDOW, JobPace
from rainier_queue.queue import Reservation

from ..contract.jobs import a_job

pytestmark = pytest.mark.timeout(60)


def pushed_here(queue: RabbitMQQueue) -> int:
    """Jobs the broker pushed to this queue object that nobody took yet."""
    consumer = getattr(queue, "_consumer")  # noqa: B009 - the driver's own part
    return int(consumer.buffered(queue.work_queue_for("default")))


async def until_pushed(queue: RabbitMQQueue, count: int) -> int:
    for _ in range(200):
        if pushed_here(queue) >= count:
            break
        await asyncio.sleep(0.01)
    return pushed_here(queue)


async def test_a_workers_reserve_consumes_so_jobs_are_pushed_to_it_as_slots_free(
    rabbit: RabbitMQQueue,
) -> None:
    await rabbit.push_many([a_job(payload={"n": n}) for n in range(6)])
    rabbit.on_worker_start()
    first: list[Reservation] = []
    while len(first) < 3:
        got = await rabbit.reserve("default", limit=3 - len(first))
        assert got, "a worker's reserve found nothing with jobs left"
        first += got
    for reservation in first:
        await rabbit.acknowledge(reservation)
    # Its window freed: the broker pushes the next jobs without being asked for each.
    assert await until_pushed(rabbit, 1) >= 1
    rest: list[Reservation] = []
    while len(rest) < 3:
        got = await rabbit.reserve("default", limit=3 - len(rest))
        assert got, "a worker's reserve found nothing with jobs left"
        rest += got
    assert sorted(r.job.payload["n"] for r in first + rest) == list(range(6))
    for reservation in rest:
        await rabbit.acknowledge(reservation)
    assert await rabbit.size("default") == 0


async def test_a_scripts_reserve_has_nothing_pushed_to_it(rabbit: RabbitMQQueue) -> None:
    await rabbit.push_many([a_job(payload={"n": n}) for n in range(3)])
    got = await rabbit.reserve("default", limit=2)
    assert len(got) == 2
    await rabbit.push_many([a_job(payload={"n": n}) for n in range(3, 6)])
    await asyncio.sleep(0.2)
    assert pushed_here(rabbit) == 0
    assert await rabbit.size("default") == 4
    for reservation in got:
        await rabbit.acknowledge(reservation)


def test_the_window_widens_only_while_jobs_are_settled_quickly() -> None:
    pace = JobPace()
    assert pace.least_window() == 0  # nothing measured: the slots decide
    pace.settled(1)
    assert pace.least_window() == 0  # one settle is no interval yet
    pace.settled(8)
    assert pace.least_window() == QUICK_WINDOW
    slow = JobPace()
    slow.seconds = 2 * HOLD_BOUND / QUICK_WINDOW
    assert slow.least_window() == 0
