# SPDX-License-Identifier: MIT
"""Jobs as Kafka records: what a push writes, what a reserve accepts, where a failed job goes.

A record is keyed by the job's unique key, else its id, and its headers name
the job and its attempts; a pushed job is counted in the lag and comes back
as attempt one, its position in the reservation and not in the payload. The
queue never creates a topic, so a missing one is an error that says to create
it. A record that is not a job is produced to `{topic}.failed` with an error
and passed; a failed job is produced there with why, and a missing failed
topic is logged.
None of them may wedge the partition, because on a log every record behind a
stuck one waits with it.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from rainier_queue.drivers.kafka import KafkaPosition
from rainier_queue.drivers.kafka.connection import record_headers, record_key
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerRejected

from ..kafka_broker import KafkaBroker
from .conftest import Opener, a_job, records_of

# -- without a broker --------------------------------------------------------------------


def test_a_record_is_keyed_by_its_unique_key_else_its_id_and_names_its_job() -> None:
    job = a_job()
    unique = job.with_changes(unique_key="account-7")

    assert record_key(job) == job.id.encode()
    assert record_key(unique) == b"account-7"
    assert dict(record_headers(job))["job"] == b"note"


# -- against the broker ------------------------------------------------------------------


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


async def test_a_record_that_is_not_a_job_is_recorded_as_failed_and_passed_with_an_error(
    tansu: KafkaBroker,
    topics: Any,
    open_kafka: Opener,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
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
    failed = await records_of(tansu, prefix + "default.failed")
    raws = [QueuedJob.from_json(r.value).payload["raw"] for r in failed]
    assert raws == ["{not json", '{"an": "event"}']


async def test_a_missing_topic_is_an_error_that_says_to_provision_it_and_creates_nothing(
    tansu: KafkaBroker, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()

    with pytest.raises(BrokerRejected, match="rainier-queue provision --queue nowhere") as refused:
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
