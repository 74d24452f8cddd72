# SPDX-License-Identifier: MIT
"""How fast can one consumer drain a quorum queue through a window of N unacknowledged jobs?

Why: our worker's consumer window is the jobs it holds plus the slots it asks
for (about 3x its concurrency with jobs held ahead), and at concurrency 8 its
drain ran well behind its own at 32 and behind Dramatiq's (classic queues,
a window of 2x its threads). The question is whether the broker itself caps
a small window: on a quorum queue a settle goes through the queue's Raft log
before the broker counts the slot free and sends the next delivery, so each
slot waits a commit per job, where a classic queue frees it at once.

This takes no part of rainier-queue: a bare aiormq consumer per queue type
and window acknowledges each delivery as it arrives, batched per event-loop
turn with `multiple=True` (the way our worker batches), with no job to run.
What it reports is the broker's ceiling for that window, the most any
client could drain through it; rounds alternate the settings.

    .venv/bin/python -m bench.studies.amqp_window --jobs 5000 --window 8 --window 24 --window 64
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import aiormq
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

URL = "amqp://guest:guest@127.0.0.1:5672/"


async def fill(channel: aiormq.abc.AbstractChannel, name: str, jobs: int) -> None:
    """Publish `jobs` small persistent messages, confirmed, a thousand at a time."""
    props = spec.Basic.Properties(delivery_mode=2)
    for start in range(0, jobs, 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(b"{}", routing_key=name, properties=props)
                for _ in range(start, min(jobs, start + 1000))
            )
        )


async def drain(
    connection: aiormq.abc.AbstractConnection, name: str, jobs: int, window: int
) -> float:
    """Seconds for one consumer with `window` unacknowledged at most to take and ack `jobs`."""
    channel = await connection.channel()
    await channel.basic_qos(prefetch_count=window)
    done = asyncio.Event()
    seen = 0
    pending: list[int] = []
    acks: set[asyncio.Future[None]] = set()

    def flush() -> None:
        if pending:
            tag = max(pending)
            pending.clear()
            ack = asyncio.ensure_future(channel.basic_ack(tag, multiple=True))
            acks.add(ack)
            ack.add_done_callback(acks.discard)

    async def on_message(message: DeliveredMessage) -> None:
        nonlocal seen
        seen += 1
        if not pending:
            asyncio.get_running_loop().call_soon(flush)
        pending.append(int(message.delivery_tag or 0))
        if seen >= jobs:
            done.set()

    started = time.perf_counter()
    await channel.basic_consume(name, on_message)
    await done.wait()
    took = time.perf_counter() - started
    flush()
    await channel.close()
    return took


async def one(kind: str, window: int, jobs: int) -> float:
    connection = await aiormq.connect(URL)
    try:
        channel = await connection.channel(publisher_confirms=True)
        name = f"rqstudy_window_{uuid.uuid4().hex[:8]}"
        args: dict[str, Any] = {"x-queue-type": kind}
        await channel.queue_declare(name, durable=True, arguments=args)
        try:
            await fill(channel, name, jobs)
            return jobs / await drain(connection, name, jobs, window)
        finally:
            await channel.queue_delete(name)
    finally:
        await connection.close()


async def main(jobs: int, windows: list[int], kinds: list[str], rounds: int) -> None:
    rates: dict[tuple[str, int], list[float]] = {}
    for round_ in range(rounds):
        order = [(k, w) for k in kinds for w in windows]
        if round_ % 2:
            order.reverse()
        for kind, window in order:
            rates.setdefault((kind, window), []).append(await one(kind, window, jobs))
    print(f"{jobs} jobs, one consumer, acks per loop turn with multiple=True; jobs/s")
    print(f"{'queue':<8} {'window':>6} {'median':>8} {'min':>8} {'max':>8}")
    for (kind, window), got in sorted(rates.items()):
        print(
            f"{kind:<8} {window:>6} {statistics.median(got):>8.0f} "
            f"{min(got):>8.0f} {max(got):>8.0f}"
        )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--window", type=int, action="append", dest="windows")
    parser.add_argument("--kind", action="append", dest="kinds", help="quorum, classic")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    windows = args.windows or [8, 24, 64]
    asyncio.run(main(args.jobs, windows, args.kinds or ["quorum", "classic"], args.rounds))


if __name__ == "__main__":
    cli()
