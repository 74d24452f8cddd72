# SPDX-License-Identifier: MIT
"""The Redis driver's durable mode: each push waits (`WAIT`) for replicas to confirm it.

Every test runs against a real primary and replica that it (or its module)
starts on free loopback ports, never the shared server on 6379. Servers
are slowed or broken with signals (SIGSTOP, SIGKILL), not mocks; where a
test needs a push to be in flight, it waits until the server shows the
push's WAIT blocked, never for a fixed time.

What happens when the primary fails is in `tests/faults/test_redis_failover.py`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from rainier_queue import (
    Job,
    JobContext,
    LockManager,
    NotReplicated,
    OutcomeUnknown,
    QueueManager,
)
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable, ConfigurationError, UnknownOption
from rainier_queue.queue import Queue

from ..redis_servers import RedisServers, replicated


def a_job(queue: str = "default") -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex}, queue=queue)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[int, int]]:
    """A primary and its replica for the tests that leave both running."""
    servers, primary, replica = replicated()
    try:
        yield primary, replica
    finally:
        servers.stop()


@pytest.fixture
def own_pair() -> Iterator[tuple[RedisServers, int, int]]:
    """A primary and replica of the test's own, for tests that stop or kill one."""
    servers, primary, replica = replicated()
    try:
        yield servers, primary, replica
    finally:
        for proc in servers.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a stopped server cannot be terminated
        servers.stop()


@pytest.fixture
def open_at(opened: list[Queue]) -> Any:
    prefix = f"rq:{uuid.uuid4().hex[:10]}:"

    def opener(port: int, query: str = "", **options: Any) -> RedisQueue:
        url = f"redis://127.0.0.1:{port}/0?prefix={prefix}{'&' if query else ''}{query}"
        queue = open_queue(url, options)
        assert isinstance(queue, RedisQueue)
        opened.append(queue)
        return queue

    return opener


async def _waits_sent(port: int) -> int:
    """How many WAIT commands the server on `port` has run since it started."""
    client = Redis(port=port, decode_responses=True)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


async def test_a_durable_push_returns_once_the_replica_holds_the_job(
    pair: tuple[int, int], open_at: Any
) -> None:
    primary, replica = pair
    queue = open_at(primary, "wait_replicas=1&wait_timeout=5s")
    on_replica = open_at(replica)

    await queue.push(a_job())
    await queue.push_many([a_job(), a_job("other"), a_job("other")])
    await queue.push_raw("default", "not an envelope")

    # Read at once from the replica: WAIT returned only after it had applied them.
    assert await on_replica.size("default") == 3
    assert await on_replica.size("other") == 2


async def test_without_wait_replicas_a_push_sends_no_wait(
    pair: tuple[int, int], open_at: Any
) -> None:
    primary, _ = pair
    plain = open_at(primary)
    durable = open_at(primary, wait_replicas=1, wait_timeout="5s")

    before = await _waits_sent(primary)
    await plain.push(a_job())
    await plain.push_many([a_job(), a_job("other")])
    await plain.push_raw("default", "raw")
    assert await _waits_sent(primary) == before

    await durable.push_many([a_job(), a_job("other")])  # two queues: a push and a WAIT each
    assert await _waits_sent(primary) == before + 2


async def test_fewer_confirmations_than_asked_raise_not_replicated_and_the_job_is_queued_once(
    pair: tuple[int, int], open_at: Any
) -> None:
    primary, _ = pair
    queue = open_at(primary, "wait_replicas=2&wait_timeout=50ms")  # one replica exists
    job = a_job()

    with pytest.raises(NotReplicated, match="1 of 2 replica") as caught:
        await queue.push(job)

    assert isinstance(caught.value, OutcomeUnknown), "callers treating it as unknown are right"
    assert (caught.value.job_ids, caught.value.confirmed, caught.value.wanted) == ((job.id,), 1, 2)
    assert "Do not push them again" in str(caught.value)
    got = await queue.reserve("default", limit=5)
    assert [r.job.id for r in got] == [job.id], "written once, on the primary"


async def test_a_shortfall_on_a_push_to_several_queues_names_every_job_of_it(
    pair: tuple[int, int], open_at: Any
) -> None:
    primary, _ = pair
    queue = open_at(primary, "wait_replicas=2&wait_timeout=50ms")
    jobs = [a_job("a"), a_job("b"), a_job("a")]

    with pytest.raises(NotReplicated) as caught:
        await queue.push_many(jobs)

    assert sorted(caught.value.job_ids) == sorted(j.id for j in jobs)


async def test_a_replica_that_stopped_answering_makes_each_push_not_replicated(
    own_pair: tuple[RedisServers, int, int], open_at: Any
) -> None:
    servers, primary, replica = own_pair
    queue = open_at(primary, "wait_replicas=1&wait_timeout=100ms")
    servers.procs[servers.ports.index(replica)].send_signal(signal.SIGSTOP)

    with pytest.raises(NotReplicated, match="0 of 1 replica"):
        await queue.push(a_job())
    with pytest.raises(NotReplicated, match="0 of 1 replica"):
        await queue.push_raw("default", "raw")

    servers.procs[servers.ports.index(replica)].send_signal(signal.SIGCONT)
    assert await queue.size("default") == 2


async def _until_a_client_blocks(port: int) -> None:
    client = Redis(port=port, decode_responses=True)
    try:
        for _ in range(600):
            if int((await client.info("clients"))["blocked_clients"]) > 0:
                return
            await asyncio.sleep(0.01)
    finally:
        await client.aclose()
    raise AssertionError("the push's WAIT never blocked on the primary")


async def test_a_primary_lost_while_the_push_waits_is_an_unknown_outcome_not_a_shortfall(
    own_pair: tuple[RedisServers, int, int], open_at: Any
) -> None:
    servers, primary, replica = own_pair
    queue = open_at(primary, "wait_replicas=1&wait_timeout=30s")
    servers.procs[servers.ports.index(replica)].send_signal(signal.SIGSTOP)
    pushing = asyncio.create_task(queue.push(a_job()))
    await _until_a_client_blocks(primary)  # the push ran; its WAIT is waiting

    servers.kill(primary)

    with pytest.raises(OutcomeUnknown, match="lost after the push was sent") as caught:
        await pushing
    assert not isinstance(caught.value, NotReplicated)


async def test_a_durable_push_to_a_primary_that_is_down_is_a_plain_outage(
    own_pair: tuple[RedisServers, int, int], open_at: Any
) -> None:
    servers, primary, _ = own_pair
    queue = open_at(primary, "wait_replicas=1")
    servers.kill(primary)

    with pytest.raises(BrokerUnavailable, match="unreachable") as caught:
        await queue.push(a_job())
    assert not isinstance(caught.value, OutcomeUnknown), "nothing was sent"


async def test_the_report_names_the_role_and_warns_when_wait_replicas_exceeds_the_replicas(
    pair: tuple[int, int], open_at: Any
) -> None:
    primary, replica = pair
    enough = await open_at(primary, wait_replicas=1).diagnose()
    too_many = await open_at(primary, wait_replicas=2).diagnose()
    on_replica = await open_at(replica).diagnose()

    assert (enough.role, enough.connected_replicas) == ("primary", 1)
    assert "replication: a primary with 1 connected replica(s)" in enough.notes
    assert not any("wait_replicas" in w for w in enough.warnings)
    assert any("wait_replicas is 2 but the primary has 1" in w for w in too_many.warnings)
    assert any("restarts empty" in w for w in enough.warnings), "no persistence, replicas"
    assert (on_replica.role, on_replica.primary) == ("replica", f"127.0.0.1:{primary}")
    assert any("read-only replica" in w for w in on_replica.warnings)


async def test_doctor_prints_the_replication_role_and_the_wait_replicas_warning(
    pair: tuple[int, int],
) -> None:
    from ..cli.harness import APP, run

    primary, _ = pair
    url = f"redis://127.0.0.1:{primary}/0?wait_replicas=3"
    result = await asyncio.to_thread(run, "--app", APP, "--url", url, "doctor")

    assert "a primary with 1 connected replica(s)" in result.stdout, result.output
    assert "wait_replicas is 3 but the primary has 1" in result.stdout, result.output


async def test_a_queue_left_on_a_replica_rides_it_out_as_an_outage_not_a_refusal(
    pair: tuple[int, int], open_at: Any
) -> None:
    # After a failover the old primary's address may serve a replica: writes
    # fail with READONLY until the URL is fixed. Workers should wait, not
    # fail jobs, and the message should say what to do.
    _, replica = pair
    queue = open_at(replica)

    with pytest.raises(BrokerUnavailable, match="read-only replica now") as pushing:
        await queue.push(a_job())
    with pytest.raises(BrokerUnavailable, match="read-only replica now") as reserving:
        await queue.reserve("default")

    assert not isinstance(pushing.value, OutcomeUnknown), "the replica refused it: nothing written"
    assert not isinstance(reserving.value, OutcomeUnknown)


def test_the_wait_options_are_the_same_from_the_url_and_from_the_config() -> None:
    from_url = open_queue("redis://127.0.0.1:1/0?wait_replicas=2&wait_timeout=250ms")
    from_table = open_queue("redis://127.0.0.1:1/0", {"wait_replicas": 2, "wait_timeout": "250ms"})

    for queue in (from_url, from_table):
        assert queue.describe().endswith(" wait_replicas=2 wait_timeout=250ms")


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ("wait_replica=1", UnknownOption, "Did you mean `wait_replicas`"),
        ("wait_replicas=one", ConfigurationError, "whole number"),
        ("wait_replicas=-1", ConfigurationError, "cannot be negative"),
        ("wait_replicas=1&wait_timeout=0", ConfigurationError, "waits for ever"),
    ],
)
def test_a_bad_wait_option_is_refused_at_startup(
    query: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        open_queue(f"redis://127.0.0.1:1/0?{query}")


def test_zero_wait_replicas_is_the_plain_mode() -> None:
    assert "wait_replicas" not in open_queue("redis://127.0.0.1:1/0?wait_replicas=0").describe()


async def test_a_queue_reading_a_replica_reports_a_wipe_it_can_only_read(
    pair: tuple[int, int], open_at: Any, caplog: pytest.LogCaptureFixture
) -> None:
    primary, replica = pair
    on_primary, on_replica = open_at(primary, wait_replicas=1), open_at(replica)
    await on_primary.push(a_job())  # confirmed on the replica
    assert await on_primary.check_dataset() is True
    assert await on_replica.check_dataset() is True, "the replica holds the primary's marker"

    wiper = Redis(port=primary)
    try:
        pipe = wiper.pipeline(transaction=False)  # what an empty restart does to the replica
        pipe.flushall()
        pipe.wait(1, 5000)
        assert (await pipe.execute())[1] == 1
    finally:
        await wiper.aclose()

    with caplog.at_level(logging.ERROR, logger="rainier_queue.redis"):
        assert await on_replica.check_dataset() is False
    assert "is gone" in caplog.text, "a replica cannot write a marker, only miss one"
    assert await on_replica.check_dataset() is True, "reported once"


class Receipt(Job):
    name = "receipt"
    order: int

    def unique_id(self) -> str | None:
        return str(self.order)

    def handle(self, ctx: JobContext) -> None:
        pass


async def test_a_unique_job_whose_push_was_not_replicated_keeps_its_lock(
    pair: tuple[int, int], open_at: Any
) -> None:
    primary, _ = pair
    queue = open_at(primary, wait_replicas=2, wait_timeout="50ms")
    manager = QueueManager(queue, locks=LockManager(MemoryCache()))

    with pytest.raises(NotReplicated):
        await manager.dispatch(Receipt(order=7))

    assert await manager.dispatch(Receipt(order=7)) is None, "a retry would be a duplicate"
    assert await queue.size("default") == 1
