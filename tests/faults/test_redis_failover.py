# SPDX-License-Identifier: MIT
"""Redis failover without persistence: a primary and a replica, the primary killed (S09).

The reliability bar's scenario S09, on two `redis-server` processes this
test starts on free loopback ports (neither keeps anything on disk), never
the shared server on 6379. The primary is killed with SIGKILL, and then one
of two things happens:

- **It restarts empty before anyone promotes the replica.** The replica
  resyncs from it and copies its empty dataset: every queued job is gone
  from both. Nothing can save those jobs; what must hold is that nobody
  carries on as if they were there. A worker on the primary, a queue on the
  primary and a queue reading the replica each report the loss (the
  dataset marker is gone), and the count of jobs lost is the count queued.
- **The replica is promoted (`REPLICAOF NO ONE`) before the old primary
  comes back.** In the durable mode (`wait_replicas=1`), a push returns
  only once the replica holds it, so every push that returned is on the
  promoted replica, and a worker pointed there runs each job exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from redis.asyncio import Redis

from rainier_queue.connections import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable

from ..redis_servers import PRIMARY, RedisServers, replicated, wait_for_replica
from .harness import (
    assert_drained,
    config,
    count,
    each_finished_once,
    output,
    terminate,
    until_finished,
    worker,
)

pytestmark = pytest.mark.slow

QUEUED = 2000
"""Jobs waiting when the primary dies (S08 and S09 ask for 2k)."""


@pytest.fixture
def pair() -> Iterator[tuple[RedisServers, int, int]]:
    servers, primary, replica = replicated()
    try:
        yield servers, primary, replica
    finally:
        servers.stop()


def _open(port: int, query: str = "") -> RedisQueue:
    queue = open_queue(f"redis://127.0.0.1:{port}/0?prefix=rq:s09:{query}")
    assert isinstance(queue, RedisQueue)
    return queue


async def _check_dataset(queue: RedisQueue) -> bool:
    """`check_dataset`, past the `BrokerUnavailable` a pooled connection gives after a restart."""
    for _ in range(50):
        try:
            return await queue.check_dataset()
        except BrokerUnavailable:
            await asyncio.sleep(0.1)
    return await queue.check_dataset()


async def _until_printed(proc: subprocess.Popen[bytes], text: str, within: float = 30) -> None:
    """Wait until the worker has printed `text` (a liveness bound, not a timing assertion)."""
    deadline = time.monotonic() + within
    while text not in output(proc):
        assert proc.poll() is None, f"the worker exited: {output(proc)}"
        assert time.monotonic() < deadline, f"the worker never said {text!r}: {output(proc)}"
        await asyncio.sleep(0.1)


@pytest.mark.timeout(120)
async def test_a_primary_restarted_empty_before_promotion_wipes_the_replica_and_both_report_it(
    tmp_path: Path, pair: tuple[RedisServers, int, int], caplog: pytest.LogCaptureFixture
) -> None:
    servers, primary, replica = pair
    # Durable pushes, so the replica is known to hold every job before the crash.
    pusher = _open(primary, "&wait_replicas=1&wait_timeout=5s")
    on_primary, on_replica = _open(primary), _open(replica)
    ledger = tmp_path / "ledger.db"
    # A worker on the primary, serving another queue, so the 2,000 jobs stay queued.
    proc = worker(
        config(tmp_path, f"redis://127.0.0.1:{primary}/0?prefix=rq:s09:"),
        ledger,
        *("--queue", "elsewhere", "--sleep", "0.2s", "--max-consecutive-errors", "1000"),
        *("--max-error-backoff", "0.5s"),
    )
    try:
        await pusher.push(QueuedJob.create("slow", {"n": -1, "seconds": 0}, queue="elsewhere"))
        await until_finished(ledger, proc, {-1})  # so its driver has read the marker
        for start in range(0, QUEUED, 500):
            await pusher.push_many(
                [QueuedJob.create("count", {"n": n}) for n in range(start, start + 500)]
            )
        assert await on_primary.check_dataset() is True
        assert await on_replica.check_dataset() is True, "the marker replicated"
        assert await on_replica.size("default") == QUEUED

        servers.kill(primary)
        servers.start(*PRIMARY, port=primary)  # same port, same empty folder: no data
        wait_for_replica(primary, replica)  # the replica has resynced from the empty primary

        with caplog.at_level(logging.ERROR, logger="rainier_queue.redis"):
            # Gone, or changed if the worker has written a new one that has replicated.
            assert await _check_dataset(on_replica) is False
            assert "lost its data" in caplog.text
            caplog.clear()
            assert await _check_dataset(on_primary) is False
            assert "lost its data" in caplog.text
        await _until_printed(proc, "lost its data")

        lost = QUEUED - await on_primary.size("default")
        assert lost == QUEUED, "every queued job is gone, and each driver said so"
        assert await on_replica.size("default") == 0
        assert await on_replica.check_dataset() is True, "reported once, then the new epoch holds"
    finally:
        await terminate(proc)
        for queue in (pusher, on_primary, on_replica):
            await queue.aclose()


@pytest.mark.timeout(120)
async def test_in_durable_mode_every_acknowledged_push_survives_a_promotion_and_runs_once(
    tmp_path: Path, pair: tuple[RedisServers, int, int]
) -> None:
    servers, primary, replica = pair
    pusher = _open(primary, "&wait_replicas=1&wait_timeout=5s")
    total = 600
    try:
        for n in range(200):  # one push each
            await pusher.push(QueuedJob.create("slow", {"n": n, "seconds": 0}))
        await pusher.push_many(
            [QueuedJob.create("slow", {"n": n, "seconds": 0}) for n in range(200, 500)]
        )
        await pusher.push_many(  # delayed: they wait in the sorted set, not the stream
            [
                QueuedJob.create("slow", {"n": n, "seconds": 0}, delay=timedelta(seconds=1))
                for n in range(500, total)
            ]
        )
        assert await pusher.check_dataset() is True
        epoch = await pusher.client.get(pusher.keys.marker)
    finally:
        await pusher.aclose()

    servers.kill(primary)
    promoted = Redis(port=replica, decode_responses=True)
    try:
        await promoted.replicaof("NO", "ONE")
        assert (await promoted.info("replication"))["role"] == "master"
        assert await promoted.get(pusher.keys.marker) == epoch, "the same dataset, not a new one"
    finally:
        await promoted.aclose()

    url = f"redis://127.0.0.1:{replica}/0?prefix=rq:s09:"
    survivor = _open(replica)
    try:
        assert await survivor.size("default") == total, "every push that returned is there"
    finally:
        await survivor.aclose()

    ledger = tmp_path / "ledger.db"
    proc = worker(config(tmp_path, url), ledger, "--concurrency", "4", "--sleep", "0.2s")
    try:
        await until_finished(ledger, proc, set(range(total)))
    finally:
        code = await terminate(proc)
    assert code == 0, output(proc)
    each_finished_once(ledger, range(total))
    assert count(ledger, "start") == count(ledger, "finish"), "no run was cut short and redone"
    await assert_drained(url)
