# SPDX-License-Identifier: MIT
"""Would writing a burst of publishes to the socket in one send raise RabbitMQ enqueue speed?

Why: aiormq's connection writer takes one frame set (a publish: method,
header and body) from its queue at a time and hands each to the transport
on its own, so a `push_many` of a thousand jobs, though every publish is
written before any confirm is awaited, costs about a thousand socket sends.
This study patches aiormq's frame queue reader, for this process only, to
join every frame set already waiting into one write (stopping at one that
must be drained or closes the connection), and times the driver's own
`push_many` and concurrent single `push`es with and without it, in
alternating rounds, wall time and this process's CPU.

    .venv/bin/python -m bench.studies.amqp_write_coalesce --rounds 5 --jobs 2000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import aio_pika
from aiormq import connection as aiormq_connection
from aiormq.abc import ChannelFrame

from rainier_queue.connections import open_queue
from rainier_queue.drivers.rabbitmq import RabbitMQQueue
from rainier_queue.envelope import QueuedJob

HOST = "127.0.0.1:5672"
ORIGINAL = aiormq_connection.FrameGenerator.__anext__


async def _coalescing(self: aiormq_connection.FrameGenerator) -> ChannelFrame:
    """The next frame set, joined with every one already queued behind it."""
    if self.close_event.is_set():
        raise StopAsyncIteration
    first: ChannelFrame = await self.queue.get()
    self.queue.task_done()
    if first.should_close or first.should_drain:
        return first
    parts = [first.payload]
    while not self.queue.empty():
        following: ChannelFrame = self.queue.get_nowait()
        self.queue.task_done()
        parts.append(following.payload)
        if following.should_close or following.should_drain:
            return ChannelFrame(b"".join(parts), following.should_close, following.drain_future)
    return ChannelFrame(b"".join(parts), False, None)


def coalesce(on: bool) -> None:
    aiormq_connection.FrameGenerator.__anext__ = _coalescing if on else ORIGINAL  # type: ignore[method-assign]


async def opened(prefix: str) -> RabbitMQQueue:
    queue = open_queue(f"amqp://guest:guest@{HOST}/?prefix={prefix}&delays=1s")
    assert isinstance(queue, RabbitMQQueue)
    return queue


async def timed(work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    return time.perf_counter() - wall, time.process_time() - cpu


async def scratch() -> AsyncIterator[str]:
    prefix = "rq-study-write." + uuid.uuid4().hex[:8] + "."
    queue = await opened(prefix)
    await queue.provision(["default"])
    await queue.aclose()
    try:
        yield prefix
    finally:
        queue = await opened(prefix)
        topology = getattr(queue, "_topology")  # noqa: B009 - the driver's own names
        connection = await aio_pika.connect(f"amqp://guest:guest@{HOST}/")
        channel = await (await connection.channel()).get_underlay_channel()
        for _, name, _ in topology.wanted(["default"]):
            await channel.queue_delete(name)
        await channel.exchange_delete(f"{prefix}failed")
        await connection.close()
        await queue.aclose()


def jobs(count: int) -> list[QueuedJob]:
    return [QueuedJob.create("note", {"n": n}, queue="default") for n in range(count)]


async def one_round(prefix: str, args: argparse.Namespace) -> list[tuple[str, float, float]]:
    """Both workloads on a new connection (so its writer runs as patched or not)."""
    queue = await opened(prefix)
    try:
        batch = jobs(args.jobs)
        await queue.push(batch[0])  # connect and open the channel outside the time

        async def many() -> None:
            await queue.push_many(batch[1:])

        async def concurrent() -> None:
            singles = jobs(args.jobs)
            for start in range(0, len(singles), args.concurrency):
                part = singles[start : start + args.concurrency]
                await asyncio.gather(*(queue.push(job) for job in part))

        out = [("push_many", *await timed(many))]
        out.append(("push x concurrency", *await timed(concurrent)))
        await queue.clear("default")
        return out
    finally:
        await queue.aclose()


async def main(args: argparse.Namespace) -> None:
    results: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    async for prefix in scratch():
        for _ in range(args.rounds):
            for on in (False, True):
                coalesce(on)
                for what, wall, cpu in await one_round(prefix, args):
                    results.setdefault((what, on), []).append((wall, cpu))
        coalesce(False)
    print(f"{args.jobs} jobs, {args.rounds} rounds alternated, medians (CPU: this process)")
    for (what, on), runs in sorted(results.items()):
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"  {what:20} {'one send' if on else 'per frame':9}  {args.jobs / wall:8.0f} jobs/s"
            f"  {cpu / args.jobs * 1e6:6.0f} us CPU a job"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50, help="single pushes at once")
    asyncio.run(main(parser.parse_args()))
