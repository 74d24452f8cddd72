# SPDX-License-Identifier: MIT
"""What does the RabbitMQ server here allow a bare client, with and without our guarantees?

Why: our RabbitMQ row runs at about half of Dramatiq's drain, and its pickup
latency is about twice Dramatiq's. Dramatiq runs on classic queues and
publishes without confirms; ours runs on quorum queues, confirms every push
and acknowledges after the job. The question is how much of the gap is the
broker and those guarantees, and how much is our client: so this measures
what a bare aiormq client (the one the driver uses; no rainier-queue) gets,
setting by setting, on the same server.

- **enqueue**: `--jobs` small persistent messages published in gathers of a
  thousand, with publisher confirms (awaited) or without (as Dramatiq).
- **drain**: `--consumers` processes (our benchmark runs two workers), each
  one connection and one consumer of prefetch `--window`, acknowledging each
  delivery at once (`each`) or per event-loop turn with `multiple=True`
  (`multiple`), running nothing. Reported: jobs/s from the go to the last
  delivery, and the consumers' CPU per job.
- **latency**: an idle consumer (prefetch 4, its own process) and a
  publisher sending one message at a time at `--rate`, each carrying the
  time it was published; the consumer notes when it arrives. Confirms are
  awaited as a push does, after the message has gone.

Rounds alternate the settings; medians of `--rounds`.

    .venv/bin/python -m bench.studies.amqp_ceiling --jobs 5000 --window 16 --window 64
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiormq
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

URL = "amqp://guest:guest@127.0.0.1:5672/"
PERSISTENT = spec.Basic.Properties(delivery_mode=2)


@dataclass(frozen=True)
class Setting:
    kind: str
    """quorum or classic"""
    confirms: bool
    acks: str
    """each or multiple"""
    window: int

    def label(self) -> str:
        confirm = "confirms" if self.confirms else "no confirms"
        return f"{self.kind:<7} {confirm:<11} acks {self.acks:<8} window {self.window:>3}"


def _loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # the worker's loop when it is installed

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def run(coroutine: Any) -> Any:
    loop = _loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


# -- the consumers (each its own process) -------------------------------------------------


def consumer(name: str, window: int, acks: str, jobs: int, shared: Any) -> None:
    """One consumer process; `shared` is (counter, ready, go, done, cpu out)."""
    run(_consume(name, window, acks, jobs, *shared))


async def _consume(
    name: str,
    window: int,
    acks: str,
    jobs: int,
    counter: Any,
    ready: Any,
    go: Any,
    done: Any,
    cpu_out: Any,
) -> None:
    connection = await aiormq.connect(URL)
    channel = await connection.channel()
    await channel.basic_qos(prefetch_count=window)
    loop = asyncio.get_running_loop()
    pending: list[int] = []
    background: set[asyncio.Future[Any]] = set()

    def later(call: Any) -> None:
        task = asyncio.ensure_future(call)
        background.add(task)
        task.add_done_callback(background.discard)

    def flush() -> None:
        if pending:
            tag = pending[-1]
            pending.clear()
            later(channel.basic_ack(tag, multiple=True))

    async def on_message(message: DeliveredMessage) -> None:
        tag = int(message.delivery_tag or 0)
        if acks == "each":
            later(channel.basic_ack(tag))
        else:
            if not pending:
                loop.call_soon(flush)
            pending.append(tag)
        with counter.get_lock():
            counter.value += 1
            seen = counter.value
        if seen >= jobs:
            done.set()

    ready.set()
    await loop.run_in_executor(None, go.wait)
    cpu = time.process_time()
    await channel.basic_consume(name, on_message)
    await loop.run_in_executor(None, done.wait)
    used = time.process_time() - cpu
    flush()
    await asyncio.sleep(0.05)
    cpu_out.put(used)
    await connection.close()


# -- enqueue and drain ---------------------------------------------------------------------


async def fill(channel: aiormq.abc.AbstractChannel, name: str, jobs: int) -> float:
    """Seconds to publish `jobs` small persistent messages, a thousand at a time."""
    started = time.perf_counter()
    for start in range(0, jobs, 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(b"{}", routing_key=name, properties=PERSISTENT)
                for _ in range(start, min(jobs, start + 1000))
            )
        )
    # Without confirms the publishes return once written: a round trip says they all arrived.
    await channel.basic_qos(prefetch_count=0)
    return time.perf_counter() - started


async def declared(kind: str) -> tuple[aiormq.abc.AbstractConnection, str]:
    connection = await aiormq.connect(URL)
    channel = await connection.channel()
    name = f"rqstudy_ceiling_{uuid.uuid4().hex[:8]}"
    await channel.queue_declare(name, durable=True, arguments={"x-queue-type": kind})
    await channel.close()
    return connection, name


async def delete(connection: aiormq.abc.AbstractConnection, name: str) -> None:
    channel = await connection.channel()
    await channel.queue_delete(name)
    await connection.close()


def one_drain(setting: Setting, jobs: int, consumers: int) -> tuple[float, float, float]:
    """(enqueue jobs/s, drain jobs/s, consumers' CPU µs per job) for one setting."""
    ctx = mp.get_context("spawn")

    async def prepare() -> tuple[float, str]:
        connection, name = await declared(setting.kind)
        channel = await connection.channel(publisher_confirms=setting.confirms)
        took = await fill(channel, name, jobs)
        await connection.close()
        return jobs / took, name

    enqueue, name = run(prepare())
    counter = ctx.Value("l", 0)
    go, done = ctx.Event(), ctx.Event()
    cpu_queue = ctx.Queue()
    readies = [ctx.Event() for _ in range(consumers)]
    procs = [
        ctx.Process(
            target=consumer,
            args=(name, setting.window, setting.acks, jobs, (counter, r, go, done, cpu_queue)),
        )
        for r in readies
    ]
    for proc in procs:
        proc.start()
    for ready in readies:
        ready.wait(60)
    started = time.perf_counter()
    go.set()
    done.wait(300)
    took = time.perf_counter() - started
    cpu = sum(cpu_queue.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(30)

    async def cleanup() -> None:
        connection = await aiormq.connect(URL)
        await delete(connection, name)

    run(cleanup())
    return enqueue, jobs / took, cpu / jobs * 1e6


# -- latency -------------------------------------------------------------------------------


def listener(name: str, samples: int, ready: Any, out: Any) -> None:
    run(_listen(name, samples, ready, out))


async def _listen(name: str, samples: int, ready: Any, out: Any) -> None:
    connection = await aiormq.connect(URL)
    channel = await connection.channel()
    await channel.basic_qos(prefetch_count=4)
    got: list[float] = []
    finished = asyncio.Event()

    async def on_message(message: DeliveredMessage) -> None:
        got.append((time.time() - float(message.body)) * 1000)
        await channel.basic_ack(int(message.delivery_tag or 0))
        if len(got) >= samples:
            finished.set()

    await channel.basic_consume(name, on_message)
    ready.set()
    await finished.wait()
    out.put(got)
    await connection.close()


def one_latency(kind: str, confirms: bool, samples: int, rate: float) -> list[float]:
    """Publish-to-arrival in ms of `samples` messages sent one at a time at `rate` a second."""
    ctx = mp.get_context("spawn")

    async def declare() -> str:
        connection, name = await declared(kind)
        await connection.close()
        return name

    name = run(declare())
    ready, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=listener, args=(name, samples + 1, ready, out))
    proc.start()
    ready.wait(60)

    async def paced() -> None:
        conn = await aiormq.connect(URL)
        channel = await conn.channel(publisher_confirms=confirms)
        loop = asyncio.get_running_loop()
        await channel.basic_publish(repr(time.time()).encode(), routing_key=name)  # warm up
        await asyncio.sleep(0.5)
        start = loop.time()
        for seq in range(samples):
            delay = start + seq / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            body = repr(time.time()).encode()
            await channel.basic_publish(body, routing_key=name, properties=PERSISTENT)
        await conn.close()

    run(paced())
    got: list[float] = out.get(timeout=samples / rate + 60)[1:]
    proc.join(30)

    async def cleanup() -> None:
        await delete(await aiormq.connect(URL), name)

    run(cleanup())
    return sorted(got)


def pct(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, round((len(ordered) - 1) * p / 100))]


# -- the report ----------------------------------------------------------------------------


def rounds_of(rounds: int, settings: list[Any], once: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    results: dict[Any, list[Any]] = {s: [] for s in settings}
    for round_ in range(rounds):
        order = settings if round_ % 2 == 0 else list(reversed(settings))
        for setting in order:
            results[setting].append(once(setting))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--window", type=int, action="append", dest="windows")
    parser.add_argument("--kind", action="append", dest="kinds", help="quorum, classic")
    parser.add_argument("--acks", action="append", help="each, multiple")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--no-drain", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    kinds = args.kinds or ["quorum", "classic"]
    windows = args.windows or [16, 64]
    if not args.no_drain:
        settings = [
            Setting(kind, kind == "quorum", acks, window)
            for kind in kinds
            for acks in args.acks or ["each", "multiple"]
            for window in windows
        ]
        drained = rounds_of(
            args.rounds, settings, lambda s: one_drain(s, args.jobs, args.consumers)
        )
        print(f"{args.jobs} jobs, {args.consumers} consumer processes, medians of {args.rounds}")
        print(
            f"{'setting':<52} {'enqueue/s':>9} {'drain/s':>8} {'min':>6} {'max':>6} {'µs/job':>7}"
        )
        for setting, got in drained.items():
            rates = [d for _, d, _ in got]
            print(
                f"{setting.label():<52} {statistics.median(e for e, _, _ in got):>9.0f} "
                f"{statistics.median(rates):>8.0f} {min(rates):>6.0f} {max(rates):>6.0f} "
                f"{statistics.median(c for _, _, c in got):>7.0f}"
            )
    if not args.no_latency:
        pairs = [(kind, kind == "quorum") for kind in kinds]
        waited = rounds_of(
            args.rounds, pairs, lambda p: one_latency(p[0], p[1], args.samples, args.rate)
        )
        print(f"publish-to-arrival, {args.samples} messages at {args.rate:g}/s, medians of rounds")
        for (kind, confirms), got in waited.items():
            p50 = statistics.median(pct(g, 50) for g in got)
            p99 = statistics.median(pct(g, 99) for g in got)
            confirm = "confirms" if confirms else "no confirms"
            print(f"{kind:<7} {confirm:<11} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")


if __name__ == "__main__":
    main()
