# SPDX-License-Identifier: MIT
"""Kafka under real worker processes: two of them sharing a six-partition topic.

The generic process tests (test_workers.py) assume any worker can take any
waiting job; on a log one partition serves one job at a time, so how the
work is shared depends on the topic's partitions. Here two `rainier-queue
work` processes share one six-partition topic and a Redis lock store, and
the ledger (written by the handlers themselves) shows from outside the
queue that every job ran exactly once or was failed, that both processes
worked, and that no job ran twice at once.

With a concurrency of 8 each, more than the six partitions, the workers
still share them: a process that joins late ends up serving three of the
six (which partition each job was on is read back from the topic, and the
ledger's latest starts show which process runs which partitions), and when
a process is killed, the other takes over its partitions once its leases
and its seat among the topic's workers lapse.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from redis.asyncio import Redis

from rainier_queue.connections import open_queue
from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name
from rainier_queue.envelope import QueuedJob

from ..kafka_broker import broker
from ..redis_servers import delete_keys
from ..services import require_port
from .harness import config, count, each_finished_once, events, output, worker

pytestmark = pytest.mark.slow

REDIS = "redis://127.0.0.1:6379/0"
PARTITIONS = 6
TOTAL = 5_000


@dataclass(frozen=True)
class Setup:
    url: str
    options: dict[str, str]
    prefix: str
    bootstrap: str
    keys: str


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    require_port("Redis", 6379)
    tansu = broker()
    namespace = "rqk" + uuid.uuid4().hex[:10]
    prefix = f"{namespace}."
    await tansu.create_topics([topic_name(prefix, "default")], PARTITIONS)
    await tansu.create_topics([failed_topic_name(prefix, "default")], 1)
    options = {
        "locks": f"{REDIS}?prefix={namespace}:",
        "topic_prefix": prefix,
        "batch_bytes": "1",  # right end offsets on Tansu (see tests/kafka_broker.py)
        "lease": "10s",
    }
    yield Setup(f"kafka://{tansu.bootstrap}/", options, prefix, tansu.bootstrap, namespace)
    await delete_keys(f"{namespace}:*", REDIS)


async def records_on(bootstrap: str, topic: str, expected: int) -> list[Any]:
    """The first `expected` records on `topic`, read with a plain consumer.

    Read from offset 0 (the topic is the test's own and nothing is deleted
    from it): a `seek_to_beginning` here sometimes left the consumer at the
    end offset, and reading found nothing.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        found: list[Any] = []
        deadline = time.monotonic() + 60
        while len(found) < expected:
            assert time.monotonic() < deadline, f"read {len(found)} of {expected} records back"
            found += [
                r for batch in (await consumer.getmany(timeout_ms=200)).values() for r in batch
            ]
        return found
    finally:
        await consumer.stop()


async def push_and_place(setup: Setup, total: int, seconds: float) -> dict[int, int]:
    """Push `total` ledger `slow` jobs; the partition each job number landed on."""
    jobs = [
        QueuedJob.create("slow", {"n": n, "seconds": seconds}, max_attempts=5) for n in range(total)
    ]
    queue = open_queue(setup.url, setup.options)
    try:
        for start in range(0, total, 1000):
            await queue.push_many(jobs[start : start + 1000])
    finally:
        await queue.aclose()
    records = await records_on(setup.bootstrap, topic_name(setup.prefix, "default"), total)
    return {QueuedJob.from_json(r.value).payload["n"]: r.partition for r in records}


def serving(
    ledger: Path, placed: dict[int, int], since: int = 0, last: int = 0
) -> dict[int, set[int]]:
    """Per process, the partitions of the jobs it started (after the `since`th row; the `last`)."""
    starts = [(n, pid) for _, n, _, pid, e in events(ledger)[since:] if e == "start"]
    out: dict[int, set[int]] = {}
    for n, pid in starts[-last:] if last else starts:
        out.setdefault(pid, set()).add(placed[n])
    return out


def halves(split: dict[int, set[int]]) -> bool:
    """Whether two processes serve three partitions each, none of them both."""
    parts = list(split.values())
    return len(parts) == 2 and [len(p) for p in parts] == [3, 3] and not parts[0] & parts[1]


async def until(condition: Any, what: str, procs: list[subprocess.Popen[bytes]]) -> None:
    """Wait (a liveness bound, 240 s) until `condition()`, every process alive meanwhile."""
    deadline = time.monotonic() + 240
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        for proc in procs:
            assert proc.poll() is None, output(proc)
        await asyncio.sleep(0.2)


async def failed_ids(bootstrap: str, topic: str) -> list[str]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        await consumer.seek_to_beginning(tp)
        found: list[Any] = []
        deadline = time.monotonic() + 30
        while await consumer.position(tp) < end and time.monotonic() < deadline:
            found += (await consumer.getmany(tp, timeout_ms=200)).get(tp, [])
        return [QueuedJob.from_json(r.value).id for r in found]
    finally:
        await consumer.stop()


@pytest.mark.timeout(600)
async def test_two_worker_processes_on_six_partitions_run_each_job_once_or_fail_it(
    tmp_path: Path, setup: Setup
) -> None:
    jobs = [QueuedJob.create("count", {"n": n}, max_attempts=1) for n in range(TOTAL)]
    queue = open_queue(setup.url, setup.options)
    try:
        for start in range(0, TOTAL, 1000):
            await queue.push_many(jobs[start : start + 1000])
    finally:
        await queue.aclose()
    ledger = tmp_path / "ledger.db"
    conf = config(tmp_path, setup.url, **setup.options)
    settings = ("--concurrency", "3", "--sleep", "0.1s", "--timeout", "5s", "--grace", "5s")
    procs = [worker(conf, ledger, *settings) for _ in range(2)]
    failing = {n for n in range(TOTAL) if n % 97 == 0}
    try:
        deadline = time.monotonic() + 500
        while len(count(ledger, "finish")) + len(count(ledger, "fail")) < TOTAL:
            assert time.monotonic() < deadline, "the workers did not get through the jobs"
            for proc in procs:
                assert proc.poll() is None, output(proc)
            await asyncio.sleep(0.2)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [await asyncio.to_thread(proc.wait, 60) for proc in procs]

    assert all(code in (0, 1) for code in codes), [output(p) for p in procs]  # 1: some failed
    starts = count(ledger, "start")
    assert set(starts) == set(range(TOTAL)), "every job ran"
    assert max(starts.values()) == 1, "no job ran twice, so none ran twice at once"
    assert set(count(ledger, "finish")) == set(range(TOTAL)) - failing
    assert set(count(ledger, "fail")) == failing
    pids = {pid for *_, pid, _ in events(ledger)}
    assert pids == {p.pid for p in procs}, "both processes took partitions"

    queue = open_queue(setup.url, setup.options)
    try:
        assert await queue.size("default") == 0
    finally:
        await queue.aclose()
    failed = await failed_ids(setup.bootstrap, failed_topic_name(setup.prefix, "default"))
    assert sorted(failed) == sorted(jobs[n].id for n in failing), "each failure recorded once"
    redis = Redis.from_url(REDIS)
    try:
        held = await redis.keys(f"{setup.keys}:lock:kafka*")
    finally:
        await redis.aclose()
    assert held == [], "the stopped workers gave their partitions and their seats back"


WIDE = ("--concurrency", "8", "--sleep", "0.1s", "--timeout", "2s", "--grace", "5s")
"""More slots than the topic has partitions, which used to let the first worker take all six."""


@pytest.mark.timeout(600)
async def test_a_worker_process_that_joins_late_gets_half_the_partitions_and_jobs_run_once(
    tmp_path: Path, setup: Setup
) -> None:
    total = 2400
    placed = await push_and_place(setup, total, seconds=0.05)
    ledger = tmp_path / "ledger.db"
    conf = config(tmp_path, setup.url, **setup.options)
    first = worker(conf, ledger, *WIDE)
    procs = [first]
    try:
        await until(lambda: len(count(ledger, "start")) >= 100, "the first worker runs", procs)
        procs.append(worker(conf, ledger, *WIDE))
        await until(
            lambda: halves(serving(ledger, placed, last=120)), "each serves three partitions", procs
        )
        await until(lambda: len(count(ledger, "finish")) >= total, "every job finished", procs)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [await asyncio.to_thread(proc.wait, 60) for proc in procs]

    assert codes == [0, 0], [output(p) for p in procs]
    starts = count(ledger, "start")
    assert set(starts) == set(range(total)), "every job ran"
    assert max(starts.values()) == 1, "no job ran twice, so none ran twice at once"
    each_finished_once(ledger, range(total))


@pytest.mark.timeout(600)
async def test_the_partitions_of_a_killed_worker_process_are_taken_over_by_the_other(
    tmp_path: Path, setup: Setup
) -> None:
    total = 3000
    placed = await push_and_place(setup, total, seconds=0.05)
    ledger = tmp_path / "ledger.db"
    conf = config(tmp_path, setup.url, **{**setup.options, "lease": "3s"})
    doomed, survivor = worker(conf, ledger, *WIDE), worker(conf, ledger, *WIDE)
    try:
        await until(
            lambda: halves(serving(ledger, placed, last=120)),
            "each serves three partitions",
            [doomed, survivor],
        )
        os.kill(doomed.pid, signal.SIGKILL)
        await asyncio.to_thread(doomed.wait)
        killed_at = len(events(ledger))
        await until(
            lambda: (
                serving(ledger, placed, since=killed_at).get(survivor.pid) == set(placed.values())
            ),
            "the survivor serves all six partitions",
            [survivor],
        )
        await until(
            lambda: set(count(ledger, "finish")) == set(range(total)), "all ran", [survivor]
        )
    finally:
        survivor.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(survivor.wait, 60)

    assert code == 0, output(survivor)
    mine = [(n, e) for _, n, _, pid, e in events(ledger) if pid == doomed.pid]
    interrupted = {n for n, e in mine if e == "start"} - {n for n, e in mine if e == "finish"}
    reruns = {(n, a) for _, n, a, pid, e in events(ledger) if pid == survivor.pid and e == "start"}
    for n in interrupted:
        assert any(r == n and attempt >= 2 for r, attempt in reruns), (
            f"job {n} was running when its worker was killed; it must run again, a later attempt"
        )
    starts = count(ledger, "start")
    touched = {n for n, _ in mine}
    assert all(starts[n] == 1 for n in range(total) if n not in touched), (
        "a job the killed worker never started ran once"
    )


@pytest.mark.timeout(600)
async def test_draining_workers_wait_out_a_dead_holders_leases_and_run_the_whole_backlog(
    tmp_path: Path, setup: Setup
) -> None:
    # Once, two --stop-when-empty workers found every partition held by a SIGKILLed
    # one, called the queue empty and exited 0 with most of the backlog waiting.
    total = 600
    await push_and_place(setup, total, seconds=0.05)
    ledger = tmp_path / "ledger.db"
    conf = config(tmp_path, setup.url, **{**setup.options, "lease": "3s"})
    doomed = worker(conf, ledger, *WIDE)
    await until(lambda: len(count(ledger, "start")) >= 12, "the first worker got going", [doomed])
    os.kill(doomed.pid, signal.SIGKILL)
    await asyncio.to_thread(doomed.wait)

    drains = [worker(conf, ledger, "--stop-when-empty", *WIDE) for _ in range(2)]
    codes = [await asyncio.to_thread(d.wait, 300) for d in drains]

    assert codes == [0, 0], [output(d) for d in drains]
    assert set(count(ledger, "finish")) == set(range(total)), [output(d) for d in drains]
