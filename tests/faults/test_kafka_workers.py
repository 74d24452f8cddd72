# SPDX-License-Identifier: MIT
"""Kafka under real worker processes: two of them sharing a six-partition topic.

The generic process tests (test_workers.py) assume any worker can take any
waiting job; on a log one partition serves one job at a time, so how the
work is shared depends on the topic's partitions. Here two `rainier-queue
work` processes share one six-partition topic and a Redis lock store, three
jobs at a time each, and the ledger (written by the handlers themselves)
shows from outside the queue that every job ran exactly once or was failed,
that both processes worked, and that no job ran twice at once.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from redis.asyncio import Redis

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name
from rainier_queue.envelope import QueuedJob

from ..kafka_broker import broker
from ..redis_servers import delete_keys
from ..services import require_port
from .harness import config, count, events, output, worker

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
        held = await redis.keys(f"{setup.keys}:lock:kafka:*")
    finally:
        await redis.aclose()
    assert held == [], "the stopped workers gave their partitions back"
