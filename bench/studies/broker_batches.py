# SPDX-License-Identifier: MIT
"""What a batch costs on RabbitMQ, counted in the connection's `locks` store.

Why it is asked: on a broker with no store of its own, every job of a batch
records its end in a lock store before it is acknowledged (Kafka's five
steps, `drivers/cached_batches.py`): two compare-and-sets, two reads and a
marker key, a second server's round trips beside the broker's. This runs
the same jobs through one worker twice a round, once as plain jobs and
once as a batch, and prints the median time from the first reserve to an
empty queue:

- a RabbitMQ connection on the machine's server (`--url`), a prefix of its
  own each round, provisioned and deleted after;
- the lock store `--locks` (a Redis or SQLite URL) named by its `locks`
  option; a batch's keys stay there for 30 days, so point it at a scratch
  database (the default is Redis's database 9);
- `--jobs` no-op jobs, dispatched in bulk, then one worker of
  `--concurrency` slots until the queue is empty (the batch's `then` is
  one job more).

    .venv/bin/python -m bench.studies.broker_batches --jobs 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from urllib.parse import quote

import aio_pika

from rainier_queue import Job, JobContext, JobRegistry, QueueManager, batch
from rainier_queue.connections import open_queue
from rainier_queue.drivers.rabbitmq.names import failed_exchange
from rainier_queue.drivers.rabbitmq.topology import Topology
from rainier_queue.queue import Provisionable, Queue
from rainier_queue.worker import Worker, WorkerOptions


class Nothing(Job):
    name = "bench-nothing"
    n: int = 0

    async def handle(self, ctx: JobContext) -> None:
        return None


REGISTRY = JobRegistry([Nothing])


async def _drain(queue: Queue, concurrency: int) -> float:
    options = WorkerOptions(stop_when_empty=True, drain_wait=None, concurrency=concurrency)
    began = time.perf_counter()
    await Worker(queue, REGISTRY, options).run()
    return time.perf_counter() - began


async def _round(url: str, jobs: int, concurrency: int, as_batch: bool) -> float:
    prefix = "bb" + uuid.uuid4().hex[:8] + "."
    queue = open_queue(f"{url}&prefix={prefix}")
    assert isinstance(queue, Provisionable)
    try:
        await queue.provision(["default"])
        manager = QueueManager(queue)
        work = [Nothing(n=n) for n in range(jobs)]
        if as_batch:
            await batch(work).then(Nothing(n=-1)).dispatch(manager)
        else:
            await manager.dispatch_many(work)
        return await _drain(queue, concurrency)
    finally:
        await _delete(queue, prefix)


async def _delete(queue: Queue, prefix: str) -> None:
    """Delete what `provision` declared for the round's prefix (as the contract suite does)."""
    topology = getattr(queue, "_topology")  # noqa: B009 - the driver's own list of names
    assert isinstance(topology, Topology)
    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        for _, name, _ in topology.wanted(["default"]):
            await channel.queue_delete(name)
        await channel.exchange_delete(failed_exchange(prefix))
    finally:
        await connection.close()
        await queue.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/?delays=250ms")
    parser.add_argument("--locks", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = f"{args.url}&locks={quote(args.locks, safe='')}"
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):  # alternated, so a change in the machine's load hits both
        for as_batch in (False, True):
            times[as_batch].append(await _round(url, args.jobs, args.concurrency, as_batch))
    for as_batch, taken in times.items():
        label = "batch" if as_batch else "plain"
        median = statistics.median(taken)
        print(
            f"{label}: {args.jobs} jobs, concurrency {args.concurrency}, median {median:.2f}s "
            f"({args.jobs / median:.0f} jobs/s), rounds {', '.join(f'{t:.2f}' for t in taken)}"
        )


if __name__ == "__main__":
    asyncio.run(main())
