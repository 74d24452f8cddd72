# SPDX-License-Identifier: MIT
"""Records this library did not write, and failed jobs too big for the failed topic.

A topic may be shared with producers in other languages, older or newer
releases, or a person with a console producer. That whatever they write
becomes a job or a listed failure naming what was wrong is the contract
suite's (tests/contract/test_foreign_entries.py, through the Kafka backend's
`plant`). What is Kafka's own is here: a record is never passed without
something a user can list (while that cannot be written, the cursor stays),
and `failed_jobs` reads the failed topics back, records that are not jobs
included, each failed topic under the prefix.

A failed job the failed topic refuses (a job just under the size limit, with
a long error on top) is kept without its payload, pointing at the original.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from rainier_queue.drivers.kafka.connection import KafkaClients
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable
from rainier_queue.stored import NOT_A_JOB

from ..kafka_broker import KafkaBroker
from ..kafka_foreign import produce_foreign
from .conftest import Opener, a_job, records_of


async def test_a_record_that_is_not_a_job_is_listed_with_its_key_headers_and_place(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    await produce_foreign(
        tansu,
        prefix + "default",
        [(b"as-text", b"{not json"), (b"not-utf8", b"\xff\xfe{\x00garbage"), (b"key-alone", None)],
    )
    queue = open_kafka()

    assert await queue.reserve("default", limit=4) == []

    by_key = {f.job.payload["key"]: f.job.payload for f in await queue.failed_jobs()}
    assert sorted(by_key) == ["as-text", "key-alone", "not-utf8"]
    for kept in by_key.values():
        assert kept["headers"] == [["source", "elsewhere"]]
        assert kept["position"].startswith(prefix + "default:")
    assert by_key["as-text"]["raw"] == "{not json", "the record is kept as it was"
    assert by_key["not-utf8"]["raw"] == {"base64": "//57AGdhcmJhZ2U="}
    assert by_key["key-alone"]["raw"] is None


async def test_the_listing_of_every_queue_reads_each_failed_topic_under_the_prefix(
    topics: Any, open_kafka: Opener
) -> None:
    await topics("a.b", "other")
    queue = open_kafka()
    for name in ("a.b", "other", "default"):
        await queue.push(a_job(name))
        [got] = await queue.reserve(name)
        await queue.fail(got, f"failed on {name}")

    everything = await queue.failed_jobs()

    assert sorted(f.job.queue for f in everything) == ["a.b", "default", "other"]
    assert [f.error for f in await queue.failed_jobs(queue="a.b")] == ["failed on a.b"]


async def test_a_record_on_a_failed_topic_that_is_not_a_job_is_still_listed(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    await produce_foreign(
        tansu,
        prefix + "default.failed",
        [(b"k1", b"\xff not a job"), (b"k2", None), (b"k3", b'{"v": 99}')],
    )
    queue = open_kafka()

    listed = await queue.failed_jobs(queue="default")

    assert len(listed) == 3
    assert {f.job.name for f in listed} == {NOT_A_JOB}
    errors = " | ".join(f.error for f in listed)
    assert "not valid UTF-8" in errors
    assert "no value" in errors
    assert "newer rainier-queue" in errors


async def test_a_failed_job_too_large_for_the_failed_topic_is_kept_without_its_payload(
    tansu: KafkaBroker,
    topics: Any,
    open_kafka: Opener,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Just under the producer's 1 MiB request limit on its own topic; the error
    # text on top of it makes the failed record too large to produce.
    queue = open_kafka()
    big = a_job().with_changes(payload={"blob": "x" * 1_000_000})
    await queue.push(big)
    await queue.push(a_job())
    [got] = await queue.reserve("default")

    with caplog.at_level(logging.ERROR, "rainier_queue.kafka"):
        await queue.fail(got, "it broke: " + "e" * 100_000)

    [record] = await records_of(tansu, prefix + "default.failed")
    kept = QueuedJob.from_json(record.value)
    headers = dict(record.headers)
    assert (kept.id, kept.name, kept.payload) == (big.id, big.name, None)
    assert headers["failed-from"] == str(got.handle).encode()
    error = headers["error"].decode()
    assert error.startswith("it broke: eee")
    assert "payload was left out" in error
    assert str(got.handle) in error, "it points at the original record, which the log keeps"
    assert "refused" in caplog.text
    [listed] = await queue.failed_jobs()
    assert listed.job.id == big.id
    assert "payload was left out" in listed.error
    [following] = await queue.reserve("default")
    assert following.job.id != big.id, "the partition moved on, once something was recorded"


async def test_a_failed_job_whose_payload_holds_a_lone_surrogate_is_still_recorded(
    tansu: KafkaBroker, topics: Any, open_kafka: Opener, prefix: str
) -> None:
    queue = open_kafka()
    await queue.push(a_job())
    [got] = await queue.reserve("default")
    # Only a path that skipped the read checks could hand out such a job; the writer copes.
    odd = dataclasses.replace(got, job=got.job.with_changes(payload={"text": "a\ud800b"}))

    await queue.fail(odd, "failed on a\udcffb")

    [record] = await records_of(tansu, prefix + "default.failed")
    assert b"\\ud800" in record.value
    assert dict(record.headers)["error"] == b"failed on a\\udcffb"
    [listed] = await queue.failed_jobs()
    assert listed.job.name == NOT_A_JOB, "listed as it is: a record that is not text"
    assert "lone surrogate" in listed.error
    assert await queue.size("default") == 0


async def test_a_record_that_is_not_a_job_stays_at_the_cursor_while_its_failure_cannot_be_written(
    tansu: KafkaBroker,
    topics: Any,
    open_kafka: Opener,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = open_kafka()
    await queue.push_raw("default", "{not a job")
    job = a_job()
    await queue.push(job)
    produce = KafkaClients.produce

    async def failed_topic_down(self: KafkaClients, topic: str, *args: Any) -> None:
        if topic.endswith(".failed"):
            raise BrokerUnavailable("the failed topic's leader is away (injected)")
        await produce(self, topic, *args)

    monkeypatch.setattr(KafkaClients, "produce", failed_topic_down)
    with pytest.raises(BrokerUnavailable):
        await queue.reserve("default")
    assert await queue.size("default") == 2, "the cursor did not move past it"

    monkeypatch.setattr(KafkaClients, "produce", produce)
    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    [record] = await records_of(tansu, prefix + "default.failed")
    assert QueuedJob.from_json(record.value).payload["raw"] == "{not a job"
