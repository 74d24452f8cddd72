# SPDX-License-Identifier: MIT
"""Writing a failed job, or a record that is not a job, to the queue's failed topic.

On a log, moving the cursor past a record is the only way to be done with
it, and a record passed without a trace is a job lost for good. So the
cursor moves past a failed job, or past a record that is not a job at all,
only once something a user can list is on `{topic}.failed` (or the topic
is missing, which is how a deployment says it keeps no failed jobs).

What is written is the whole job when the failed topic takes it. When it
refuses (the usual reason is size: a job that was just under the limit on
its own topic, with an error text on top), this module keeps what it can:
first the job without its payload, then without its headers too, each time
with a note in the error saying what was left out, why, and where the
original record still is (topic, partition, offset: the log keeps it until
its retention removes it). Each refusal is logged at ERROR. Only an outage
(`BrokerUnavailable`) is passed up, and then the cursor stays where it was,
so the record is handled again once the broker is back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiokafka import ConsumerRecord

from ..._clock import utcnow
from ...envelope import JSONValue, QueuedJob, format_time
from ...envelope.fields import raw_value
from ...envelope.reading import Malformed
from ...errors import BrokerRejected
from ..malformed import quarantine
from .connection import KafkaClients, record_value
from .names import FAILED_SUFFIX, KafkaPosition

log = logging.getLogger("rainier_queue.kafka")

ERROR_CUT = 4096
"""Characters of the error text kept in a failed record the topic refused at full size."""

LEAST_ERROR_CUT = 512
"""Characters of it kept in the smallest record this module writes."""


def cut(text: str, limit: int) -> str:
    """`text`, shortened to about `limit` characters with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters cut)"


def not_a_job(record: ConsumerRecord[bytes, bytes], malformed: Malformed, queue: str) -> QueuedJob:
    """The envelope a record that is not a job is failed as: its value, key and headers kept."""
    position = KafkaPosition(record.topic, record.partition, record.offset)
    payload: dict[str, JSONValue] = {"raw": malformed.raw}
    if record.key is not None:
        payload["key"] = raw_value(record.key)
    if record.headers:
        payload["headers"] = [[name, raw_value(value)] for name, value in record.headers]
    payload["position"] = str(position)
    job = malformed.as_job(queue=queue, job_id=f"kafka:{position}")
    return job.with_changes(payload=payload)


def not_a_job_error(malformed: Malformed, origin: KafkaPosition) -> str:
    """The error a record that is not a job is failed with: what was wrong, and where it is."""
    return (
        f"not a job: {malformed.reason}. The record at {origin} was written by something other "
        "than this version of rainier-queue; its value is kept here as it was (payload `raw`), "
        "and the log keeps the original until the topic's retention removes it. Fix what wrote "
        "it, then produce a corrected job"
    )


def why_not_a_job(record: ConsumerRecord[bytes, bytes], malformed: Malformed) -> Malformed:
    """A record without a value is a tombstone; say so rather than "`the entry` must be text"."""
    if record.value is not None:
        return malformed
    return Malformed(reason="the record has no value (a tombstone, or a key alone)", raw=None)


class FailedRecords:
    """Produces failed jobs to their queue's failed topic, keeping what the topic will take."""

    def __init__(self, clients: KafkaClients) -> None:
        self._clients = clients

    async def record(self, job: QueuedJob, error: str, origin: KafkaPosition) -> None:
        """Put `job`, failed with `error` at `origin`, on `origin`'s failed topic.

        Returns once something is recorded, or once it is logged that nothing
        could be; raises only `BrokerUnavailable` (the caller keeps its cursor).
        """
        failed = origin.topic + FAILED_SUFFIX
        if await self._clients.partitions(failed) is None:
            log.error(
                "job `%s` %s failed (%s), and the topic %r that keeps failed jobs does not "
                "exist, so it is recorded only here (the record stays in the log at %s until "
                "retention removes it); create the topic to keep them",
                job.name,
                job.id,
                cut(error, ERROR_CUT),
                failed,
                origin,
            )
            return
        headers = {"error": error, "failed-at": format_time(utcnow()), "failed-from": str(origin)}
        try:
            await self._clients.produce(failed, job, headers)
            return
        except BrokerRejected as exc:
            refusal = exc
        size = len(record_value(job))
        for smaller, keep in self._smaller(job):
            note = (
                f"[rainier-queue: {keep}; {failed!r} refused the whole failed job "
                f"({size:,} bytes: {cut(str(refusal), 300)}). The job as it was pushed is still "
                f"in the log at {origin} until the topic's retention removes it]"
            )
            limit = ERROR_CUT if smaller.headers else LEAST_ERROR_CUT
            log.error(
                "job `%s` %s failed, and the failed topic %r refused its record (%s); recording "
                "it with %s. The original record is at %s",
                job.name,
                job.id,
                failed,
                refusal,
                keep,
                origin,
            )
            smaller_headers = {
                **headers,
                "error": f"{cut(error, limit)}\n{note}",
                "payload-left-out": keep,
            }
            try:
                await self._clients.produce(failed, smaller, smaller_headers)
                return
            except BrokerRejected as exc:
                refusal = exc
        log.error(
            "job `%s` %s failed (%s), and the failed topic %r refused even a record without its "
            "payload (%s): it is recorded only here. The job is still in the log at %s until "
            "retention removes it",
            job.name,
            job.id,
            cut(error, LEAST_ERROR_CUT),
            failed,
            refusal,
            origin,
        )

    @staticmethod
    def _smaller(job: QueuedJob) -> list[tuple[QueuedJob, str]]:
        """Ever smaller stand-ins for `job`, each with what it leaves out."""
        without_payload = job.with_changes(payload=None)
        least = without_payload.with_changes(headers={})
        return [
            (without_payload, "the payload was left out"),
            (least, "the payload and the job's headers were left out"),
        ]

    async def record_not_a_job(
        self, record: ConsumerRecord[bytes, bytes], malformed: Malformed, queue: str
    ) -> None:
        """Put a record that is not a job on the failed topic, as a `NOT_A_JOB` envelope."""
        malformed = why_not_a_job(record, malformed)
        origin = KafkaPosition(record.topic, record.partition, record.offset)
        entry = (
            f"queue {queue!r}: the record at offset {record.offset} of partition "
            f"{record.partition} of topic {record.topic!r}"
        )
        job = not_a_job(record, malformed, queue)
        written = self.record(job, not_a_job_error(malformed, origin), origin)
        await quarantine(log, entry, malformed, "the failed topic", written)


def header_text(headers: Mapping[str, bytes], name: str) -> str | None:
    """A header's value as text (bytes that are not UTF-8 replaced), or None if absent."""
    value = headers.get(name)
    return None if value is None else value.decode("utf-8", "replace")


__all__ = [
    "FailedRecords",
    "cut",
    "header_text",
    "not_a_job",
    "not_a_job_error",
    "why_not_a_job",
]
