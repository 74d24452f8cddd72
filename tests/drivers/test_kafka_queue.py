# SPDX-License-Identifier: MIT
"""What only the Kafka driver does: partition leases, cursors, retries as records, the failed topic.

The first half needs no broker: names, keys, settings and the refusal of a
lock store other processes cannot see. The second runs against Tansu (see
tests/kafka_broker.py), each test on topics of its own under a fresh prefix,
with a memory lock store vouched for as shared, because everything here
runs in one process. The contract suite holds the driver to the port; these
pin the behaviours a log adds.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from rainier_queue.cache import Lock, LockManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.kafka import KafkaPosition, KafkaQueue
from rainier_queue.drivers.kafka.client import record_headers, record_key
from rainier_queue.drivers.kafka.config import KafkaSettings, read_settings
from rainier_queue.drivers.kafka.names import (
    attempt_number,
    attempts_key,
    cursor_key,
    failed_topic_name,
    lease_name,
    topic_name,
)
from rainier_queue.drivers.kafka.partitions import lost_range
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerRejected, ConfigurationError, LeaseLost, UnknownOption
from rainier_queue.queue import Reservation
from rainier_queue.worker import WorkerOptions

from ..kafka_broker import KafkaBroker, broker
from ..worker.jobs import Journal, quick, worker_for

SHORT = timedelta(milliseconds=300)


def a_job(queue: str = "default", **kwargs: Any) -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex}, queue=queue, **kwargs)


def shared_locks(cache: MemoryCache | None = None) -> LockManager:
    # One process, so a memory store is as shared as it needs to be; the test vouches for it.
    return LockManager(cache or MemoryCache()).declared_shared()


def settings(**changes: Any) -> KafkaSettings:
    return KafkaSettings(brokers=("127.0.0.1:1",), **changes)


# -- without a broker --------------------------------------------------------------------


def test_a_lock_store_other_processes_cannot_see_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="shared lock store") as refused:
        KafkaQueue(settings(), LockManager(MemoryCache()))

    assert "every job would run once per worker" in str(refused.value)
    assert "redis://" in str(refused.value)
    assert "declared_shared" in str(refused.value)
    KafkaQueue(settings(), shared_locks())  # vouched for: accepted, nothing connects yet


def test_a_memory_lock_store_named_in_the_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="shared lock store"):
        open_queue("kafka://127.0.0.1:9092/?locks=memory://")


def test_a_kafka_url_without_a_lock_store_says_how_to_name_one() -> None:
    with pytest.raises(ConfigurationError, match="`locks`"):
        open_queue("kafka://127.0.0.1:9092")


def test_an_unknown_option_is_refused_with_a_suggestion() -> None:
    with pytest.raises(UnknownOption, match="topic_prefix"):
        open_queue("kafka://h:9092/?locks=redis://x&topic_prefx=jobs.")


def test_the_url_lists_the_brokers_and_the_table_wins_over_the_query() -> None:
    read, locks = read_settings(
        "kafka://a:9093,b/?locks=redis%3A%2F%2Fc%3A6379%2F0&group=g1&lease=30s",
        {"group": "g2", "topic_prefix": "jobs."},
    )

    assert read.brokers == ("a:9093", "b:9092")
    assert locks == "redis://c:6379/0"
    assert (read.group, read.topic_prefix, read.lease) == ("g2", "jobs.", timedelta(seconds=30))


def test_credentials_become_sasl_settings_and_never_show() -> None:
    url = (
        "kafka://app:s3cret@broker:9092/?locks=redis://:pw@cache:6379&sasl_mechanism=scram-sha-512"
    )
    read, _ = read_settings(url, {"tls": "true"})

    args = read.client_arguments()
    assert args["sasl_plain_username"] == "app"
    assert args["sasl_plain_password"] == "s3cret"
    assert (args["security_protocol"], args["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    for shown in (read.describe(), repr(read)):
        assert "s3cret" not in shown
        assert "pw" not in shown


def test_a_topic_is_the_prefix_and_the_queue_name() -> None:
    assert topic_name("jobs.", "emails") == "jobs.emails"
    assert topic_name("", "send_invoice-2") == "send_invoice-2", "an ordinary name is itself"
    assert failed_topic_name("jobs.", "emails") == "jobs.emails.failed"


def test_a_queue_name_kafka_cannot_spell_is_escaped_and_never_meets_another() -> None:
    names = ["a.b", "a_b", "a b", "émails ✉", "a.failed", "a"]
    topics = [topic_name("", n) for n in names]
    failed = [failed_topic_name("", n) for n in names]

    assert topic_name("", "a.b") == "a.2eb"
    assert len(set(topics + failed)) == len(names) * 2, "distinct queues, distinct topics"
    assert all(
        set(t) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        for t in topics
    )
    with pytest.raises(ConfigurationError, match="too long"):
        topic_name("", "x" * 245)


def test_cursor_lease_and_attempt_keys_name_the_group_topic_and_partition() -> None:
    assert cursor_key("checkout", "jobs.default", 3) == "kafka-cursor:checkout:jobs.default:3"
    assert lease_name("checkout", "jobs.default", 3) == "kafka:checkout:jobs.default:3"
    assert attempts_key("g", "jobs", 0, 10) == "kafka-attempts:g:jobs:0:10"
    assert attempts_key("g", "jobs", 0, 10) != attempts_key("g", "jobs", 0, 11)
    assert cursor_key("checkout", "t", 3) != cursor_key("analytics", "t", 3)


def test_a_record_is_keyed_by_its_unique_key_else_its_id_and_names_its_job() -> None:
    job = a_job()
    unique = job.with_changes(unique_key="account-7")

    assert record_key(job) == job.id.encode()
    assert record_key(unique) == b"account-7"
    assert dict(record_headers(job))["job"] == b"note"


def test_an_attempt_counts_what_the_record_carries_and_this_offsets_deliveries() -> None:
    assert attempt_number(0, 1) == 1, "a fresh job, delivered once"
    assert attempt_number(0, 2) == 2, "the same record again, after its worker died"
    assert attempt_number(1, 1) == 2, "a retry: a new record carrying one attempt"
    assert attempt_number(2, 1) == 3


def test_a_cursor_behind_the_earliest_record_is_a_lost_range() -> None:
    assert lost_range(cursor=10, earliest=25) == (10, 25)
    assert lost_range(cursor=25, earliest=25) is None
    assert lost_range(cursor=40, earliest=25) is None


async def test_a_reservation_not_made_by_kafka_cannot_be_settled() -> None:
    queue = KafkaQueue(settings(), shared_locks())
    stranger = Reservation(job=a_job(), token="t", lease_until=None, lease=None, handle="7")

    with pytest.raises(LeaseLost, match="not reserved from Kafka"):
        await queue.acknowledge(stranger)


# -- against the broker ------------------------------------------------------------------

Opener = Callable[..., KafkaQueue]


@pytest.fixture(scope="session")
def tansu() -> KafkaBroker:
    return broker()


@pytest.fixture
def prefix() -> str:
    return f"k{uuid.uuid4().hex[:10]}."


@pytest.fixture
async def topics(tansu: KafkaBroker, prefix: str) -> Callable[..., Any]:
    async def create(*queues: str, partitions: int = 1, failed: bool = True) -> None:
        names = [topic_name(prefix, q) for q in queues]
        names += [failed_topic_name(prefix, q) for q in queues] if failed else []
        await tansu.create_topics(names, partitions)

    await create("default")
    return create


@pytest.fixture
async def open_kafka(tansu: KafkaBroker, prefix: str) -> AsyncIterator[Opener]:
    opened: list[KafkaQueue] = []

    def opener(locks: LockManager | None = None, **changes: Any) -> KafkaQueue:
        made = KafkaSettings(
            brokers=(tansu.bootstrap,), topic_prefix=prefix, batch_bytes=1, **changes
        )
        queue = KafkaQueue(made, locks or shared_locks())
        opened.append(queue)
        return queue

    yield opener
    for queue in opened:
        await queue.aclose()


async def records_of(tansu: KafkaBroker, topic: str) -> list[Any]:
    """Every record on `topic`, read with a plain consumer."""
    consumer = AIOKafkaConsumer(bootstrap_servers=tansu.bootstrap, group_id=None)
    await consumer.start()
    try:
        found: list[Any] = []
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        for _ in range(50):
            batches = await consumer.getmany(*tps, timeout_ms=200)
            found += [r for records in batches.values() for r in records]
            if all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                break
        return found
    finally:
        await consumer.stop()


async def test_a_pushed_job_is_the_lag_and_comes_back_as_attempt_one(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    job = a_job()

    assert await queue.push(job) == job.id
    assert await queue.size("default") == 1
    [got] = await queue.reserve("default")

    assert (got.job.id, got.job.attempts, got.job.payload) == (job.id, 1, job.payload)
    assert isinstance(got.handle, KafkaPosition)
    assert "__kafka" not in str(got.job.payload), "the position rides in the reservation"


async def test_acknowledging_moves_the_cursor_past_the_record(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    locks = shared_locks()
    queue = open_kafka(locks)
    await queue.push(a_job())
    [got] = await queue.reserve("default")

    await queue.acknowledge(got)

    assert isinstance(got.handle, KafkaPosition)
    cursor = await locks.cache.get(cursor_key("rainier", prefix + "default", 0))
    assert cursor == str(got.handle.offset + 1).encode()
    delivered = attempts_key("rainier", prefix + "default", 0, got.handle.offset)
    assert await locks.cache.get(delivered) is None, "the delivery count went with the record"
    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []


async def test_an_unacknowledged_job_is_handed_out_again_and_counted(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka(lease=SHORT)
    await queue.push(a_job())
    [first] = await queue.reserve("default")

    await asyncio.sleep(SHORT.total_seconds() * 1.5)
    [second] = await queue.reserve("default")

    assert second.job.id == first.job.id
    assert second.job.attempts == 2
    with pytest.raises(LeaseLost):
        await queue.acknowledge(first)


async def test_a_job_that_never_settles_uses_up_its_attempts_by_deliveries_alone(
    topics: Any, open_kafka: Opener
) -> None:
    # A poison pill kills its worker before any settle; only the per-offset count notices.
    queue = open_kafka(lease=SHORT)
    await queue.push(a_job(max_attempts=3))
    seen = []
    for _ in range(3):
        [got] = await queue.reserve("default")
        seen.append(got.job.attempts)
        await asyncio.sleep(SHORT.total_seconds() * 1.5)

    assert seen == [1, 2, 3]
    assert got.job.is_exhausted, "the worker now fails it instead of running it again"


async def test_a_released_job_is_a_new_record_that_keeps_its_attempts(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()
    await queue.push(a_job())
    [first] = await queue.reserve("default")

    await queue.release(first)
    [again] = await queue.reserve("default")

    assert (again.job.id, again.job.attempts) == (first.job.id, 2)
    assert isinstance(again.handle, KafkaPosition)
    assert isinstance(first.handle, KafkaPosition)
    assert again.handle.offset > first.handle.offset
    records = await records_of(tansu, prefix + "default")
    retry = next(r for r in records if r.offset == again.handle.offset)
    assert dict(retry.headers)["retry-of"] == str(first.handle).encode()


async def test_after_a_release_only_the_retry_can_be_settled(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    await queue.push(a_job())
    [first] = await queue.reserve("default")
    await queue.release(first)
    [retry] = await queue.reserve("default")

    with pytest.raises(LeaseLost):
        await queue.acknowledge(first)
    await queue.acknowledge(retry)
    assert await queue.size("default") == 0


async def test_a_job_released_with_a_delay_blocks_its_partition_until_due(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    await queue.push(a_job().with_changes(unique_key="k"))
    [first] = await queue.reserve("default")
    await queue.release(first, delay=timedelta(seconds=60))
    await queue.push(a_job().with_changes(unique_key="k"))  # behind it, on the same partition

    assert await queue.reserve("default", limit=5) == []
    assert await queue.size("default") == 2, "the delayed job and the one behind it"


async def test_a_job_handed_back_unrun_keeps_its_place_and_its_attempt(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    first, second = (a_job().with_changes(unique_key="k") for _ in range(2))
    await queue.push(first)
    await queue.push(second)
    [held] = await queue.reserve("default")

    await queue.release(held, count_attempt=False)
    [again] = await queue.reserve("default")

    assert (again.job.id, again.job.attempts) == (first.id, 1)
    assert again.handle == held.handle, "the same record, still ahead of the second job"


async def test_a_failed_job_goes_to_the_failed_topic_with_why_and_the_partition_moves_on(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()
    job = a_job()
    await queue.push(job)
    await queue.push(a_job())
    [got] = await queue.reserve("default")

    await queue.fail(got, "card declined")

    [record] = await records_of(tansu, prefix + "default.failed")
    headers = dict(record.headers)
    assert QueuedJob.from_json(record.value).id == job.id
    assert headers["error"] == b"card declined"
    assert headers["failed-from"] == str(got.handle).encode()
    assert headers["failed-at"]
    assert len(await queue.reserve("default")) == 1, "the next job is handed out"


async def test_a_missing_failed_topic_is_logged_and_never_wedges_the_partition(
    topics: Any, open_kafka: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    await topics("bare", failed=False)
    queue = open_kafka()
    await queue.push(a_job("bare"))
    await queue.push(a_job("bare"))
    [got] = await queue.reserve("bare")

    with caplog.at_level(logging.ERROR, "rainier_queue.kafka"):
        await queue.fail(got, "boom")

    assert "does not exist" in caplog.text
    assert "bare.failed" in caplog.text
    assert len(await queue.reserve("bare")) == 1


async def test_jobs_sharing_a_unique_key_run_in_push_order_across_partitions(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("ordered", partitions=6)
    queue = open_kafka()
    for n in range(8):
        await queue.push(a_job("ordered").with_changes(unique_key="account-7", payload=n))
        await queue.push(a_job("ordered").with_changes(payload=100 + n))
    order: list[Any] = []
    # An empty reserve on a log can mean "not fetched yet", so look until all
    # sixteen came back (or long past when they should have).
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 30
    while len(order) < 16 and loop.time() < give_up:
        got = await queue.reserve("ordered", limit=6)
        if not got:
            await asyncio.sleep(0.05)
            continue
        order += [r.job.payload for r in got]
        assert len({r.handle.partition for r in got if isinstance(r.handle, KafkaPosition)}) == (
            len(got)
        ), "one job in flight per partition"
        await queue.acknowledge_many(got)

    assert [n for n in order if n < 100] == list(range(8))
    assert sorted(order) == list(range(8)) + list(range(100, 108))


async def test_clear_skips_to_the_end_and_counts_what_it_skipped(
    topics: Any, open_kafka: Opener
) -> None:
    queue = open_kafka()
    await queue.push_many([a_job(), a_job()])

    assert await queue.clear("default") == 2
    assert await queue.size("default") == 0
    assert await queue.reserve("default") == []
    await queue.push(a_job())
    assert len(await queue.reserve("default")) == 1, "later jobs still run"


async def test_a_partition_another_worker_leased_is_left_alone(
    topics: Any, open_kafka: Opener
) -> None:
    store = MemoryCache()
    first, second = open_kafka(shared_locks(store)), open_kafka(shared_locks(store))
    await first.push(a_job())
    await first.push(a_job())
    [held] = await first.reserve("default")

    assert await second.reserve("default") == [], "the partition is the first worker's"
    assert await second.size("default") == 1, "the running job is not waiting"

    await first.acknowledge(held)
    await first.release_partitions()
    assert len(await second.reserve("default")) == 1


class Interleaved(LockManager):
    """A shared memory lock store that runs a step of a test just before a given lease is taken.

    It puts a settle at an exact point inside a reserve, and notes every lease
    given back, so a test can tell which partitions a reserve let go.
    """

    def __init__(self) -> None:
        super().__init__(MemoryCache(), shared=True)
        self.before: dict[str, Callable[[], Awaitable[Any]]] = {}
        self.given_back: list[str] = []

    async def acquire(self, name: str, ttl: timedelta) -> Lock | None:
        step = self.before.pop(name, None)
        if step is not None:
            await step()
        return await super().acquire(name, ttl)

    async def release(self, lock: Lock) -> bool:
        self.given_back.append(lock.key)
        return await super().release(lock)


async def test_a_partition_freed_while_a_reserve_looks_elsewhere_is_served_and_kept(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    # A worker frees a slot when its handler returns, so its next reserve often
    # starts while that job's acknowledgement is still on its way: the partition
    # looks busy and the reserve looks at an empty one instead. The settle lands
    # meanwhile; the reserve must hand out the next job of the freed partition
    # (its records are read already), not wait on the empty partition for the
    # broker and give the freed one's lease away.
    await topics("pair", partitions=2)
    locks = Interleaved()
    queue = open_kafka(locks)
    first, second = (a_job("pair").with_changes(unique_key="account-7") for _ in range(2))
    await queue.push_many([first, second])
    [running] = await queue.reserve("pair")
    assert isinstance(running.handle, KafkaPosition)
    busy = running.handle.partition
    empty = 1 - busy
    topic = prefix + "pair"
    locks.before[lease_name("rainier", topic, empty)] = lambda: queue.acknowledge(running)
    locks.given_back.clear()

    [got] = await queue.reserve("pair")

    assert got.job.id == second.id
    assert locks.given_back == [locks.key(lease_name("rainier", topic, empty))], (
        "the empty partition is given back; the one with work stays with this worker"
    )


async def test_a_record_is_keyed_by_its_unique_key_else_its_id_and_headed_with_its_job(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()
    plain, unique = a_job(), a_job().with_changes(unique_key="account-7")
    await queue.push_many([plain, unique])

    records = {
        QueuedJob.from_json(r.value).id: r for r in await records_of(tansu, prefix + "default")
    }

    assert records[plain.id].key == plain.id.encode()
    assert records[unique.id].key == b"account-7"
    headers = dict(records[plain.id].headers)
    assert headers["job"] == b"note"
    assert headers["attempts"] == str(plain.attempts).encode()


async def test_each_group_gets_every_job_and_keeps_its_own_cursor(
    topics: Any, open_kafka: Opener
) -> None:
    store = MemoryCache()
    billing = open_kafka(shared_locks(store), group="billing")
    audit = open_kafka(shared_locks(store), group="audit")
    job = a_job()
    await billing.push(job)
    [billed] = await billing.reserve("default")
    await billing.acknowledge(billed)

    [audited] = await audit.reserve("default")

    assert billed.job.id == audited.job.id == job.id
    assert audited.job.attempts == 1, "the other group's delivery is not counted here"
    assert await billing.size("default") == 0
    assert await billing.reserve("default") == []


async def test_giving_back_a_lease_that_had_lapsed_warns_of_a_possible_double_run(
    topics: Any, open_kafka: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    queue = open_kafka(lease=SHORT)
    await queue.push_many([a_job(), a_job()])
    [got] = await queue.reserve("default")
    await queue.acknowledge(got)  # the partition stays this worker's until it lets go
    await asyncio.sleep(SHORT.total_seconds() * 1.5)

    with caplog.at_level(logging.WARNING, "rainier_queue.kafka"):
        await queue.release_partitions()

    assert "had lapsed before it was given back" in caplog.text
    assert "partition 0" in caplog.text


async def test_a_partition_never_read_starts_at_its_earliest_record(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    # Pushed before any worker ever looked: a start at the end would skip it for good.
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap)
    await producer.start()
    job = a_job()
    try:
        await producer.send_and_wait(prefix + "default", job.to_json().encode())
    finally:
        await producer.stop()

    [got] = await open_kafka().reserve("default")

    assert got.job.id == job.id


async def test_a_record_that_is_not_a_job_is_skipped_with_an_error(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    queue = open_kafka()
    await queue.push_raw("default", "{not json")
    await queue.push_raw("default", '{"an": "event"}')
    job = a_job()
    await queue.push(job)

    with caplog.at_level(logging.ERROR, "rainier_queue.kafka"):
        [got] = await queue.reserve("default")

    assert got.job.id == job.id
    assert caplog.text.count("is not a job") == 2
    await queue.acknowledge(got)
    assert await queue.size("default") == 0


async def test_a_missing_topic_is_an_error_that_says_to_create_it_and_creates_nothing(
    tansu: KafkaBroker, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()

    with pytest.raises(BrokerRejected, match="Create it") as refused:
        await queue.push(a_job("nowhere"))
    with pytest.raises(BrokerRejected, match="does not exist"):
        await queue.reserve("nowhere")

    assert prefix + "nowhere" in str(refused.value)
    consumer = AIOKafkaConsumer(bootstrap_servers=tansu.bootstrap)
    await consumer.start()
    try:
        assert prefix + "nowhere" not in await consumer.topics()
    finally:
        await consumer.stop()


async def test_a_stopping_worker_hands_back_its_job_and_gives_its_partition_back(
    topics: Any, open_kafka: Opener, prefix: str
) -> None:
    locks = shared_locks()
    queue = open_kafka(locks)
    await queue.push(QueuedJob.create("held", {"text": "interrupted"}))
    journal = Journal()
    options: WorkerOptions = quick(grace=timedelta(milliseconds=10), timeout=timedelta(seconds=10))
    worker = worker_for(queue, journal, options)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(journal.started.wait(), 10)

    worker.stop()
    stats = await running

    assert stats.interrupted == 1
    # Handed back unrun, the partition's lease would outlive the worker by a whole lease
    # (90 s) unless the stop gives it back; another worker can take it at once.
    assert not await locks.is_held(lease_name("rainier", prefix + "default", 0))
    [again] = await open_kafka(locks).reserve("default")
    assert again.job.attempts == 1, "the interrupted delivery did not cost an attempt"
