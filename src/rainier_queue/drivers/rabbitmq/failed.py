# SPDX-License-Identifier: MIT
"""The failed store on the dead-letter queue: listed, retried, forgotten and flushed there.

One quorum queue per connection, `{prefix}failed`, holds two kinds of message:

- a job this library failed (its attempts used up, no handler for it, not a
  job at all): the job's envelope as the body, the error and the moment in
  the `x-rq-error` and `x-rq-failed-at` headers, published with a confirm
  **before** the delivery is acknowledged, so a crash between the two leaves
  the job twice, never nowhere;
- a job the broker dead-lettered itself because its delivery limit ran out
  (it killed its worker every time): the envelope as it was, with RabbitMQ's
  `x-death` header saying why.

A queue cannot be read without taking its messages, so listing takes every
message on a channel of its own (`basic.get`, unacknowledged), and closing
that channel puts them all back. Retrying or forgetting one acknowledges
just that one before the channel closes. Each costs a round trip per failed
job, so the failed queue is for inspecting failures, not a store to let grow:
flush what you have looked at. Two listings at the same moment each see
only part of it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

from ..._clock import utcnow
from ...envelope import QueuedJob, format_time, parse_time
from ...envelope.reading import Malformed, read_envelope
from ...queue import FailedJob
from .connection import AMQPClient, translated
from .names import failed_queue

log = logging.getLogger("rainier_queue.rabbitmq")

MOST_READ = 100_000
"""The most failed messages one listing reads."""

PERSISTENT = 2


def failed_properties(error: str, job_id: str) -> spec.Basic.Properties:
    return spec.Basic.Properties(
        delivery_mode=PERSISTENT,
        content_type="application/json",
        message_id=job_id,
        headers={"x-rq-error": error, "x-rq-failed-at": format_time(utcnow())},
    )


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_failed(message: DeliveredMessage, prefix: str) -> FailedJob:
    """A failed job from a message of the failed queue, whichever of the two kinds it is."""
    headers: dict[str, Any] = dict(message.header.properties.headers or {})
    read = read_envelope(message.body)
    if isinstance(read, Malformed):
        job = read.as_job(queue="?", job_id=_text(message.header.properties.message_id or "?"))
    else:
        job = read
    error = headers.get("x-rq-error")
    failed_at = utcnow()
    if error is not None:
        error = _text(error)
        with contextlib.suppress(Exception):
            failed_at = parse_time(_text(headers.get("x-rq-failed-at")))
    else:
        error, failed_at = _dead_lettered(headers, read)
    return FailedJob(job=job, error=error, failed_at=failed_at)


def _dead_lettered(headers: dict[str, Any], read: QueuedJob | Malformed) -> tuple[str, datetime]:
    deaths = headers.get("x-death") or [{}]
    death = deaths[0] if isinstance(deaths, list) and deaths else {}
    reason = _text(death.get("reason", headers.get("x-first-death-reason", "unknown")))
    when = death.get("time")
    failed_at = when.astimezone(UTC) if isinstance(when, datetime) else utcnow()
    if reason == "delivery_limit":
        error = (
            "RabbitMQ dead-lettered this job: it was delivered more often than its queue's "
            "x-delivery-limit allows without ever being settled; a worker crashed or was "
            "killed while running it (look for an out-of-memory kill, or a handler that takes "
            "its process down)"
        )
    else:
        error = f"RabbitMQ dead-lettered this job (reason: {reason})"
    if isinstance(read, Malformed):
        error = f"{error}; {read.error}"
    return error, failed_at


class FailedStore:
    """`FailedJobStore` over the failed queue of one connection."""

    def __init__(self, client: AMQPClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self.name = failed_queue(prefix)

    async def record(self, job: QueuedJob, error: str) -> None:
        """Publish `job` to the failed queue with `error`, and wait for the confirm."""
        await self._client.publish(
            self.name, job.to_json().encode(), failed_properties(error, job.id)
        )

    async def record_raw(self, body: bytes, error: str, job_id: str) -> None:
        """Publish a body that is not a job, as it was, with `error`."""
        await self._client.publish(self.name, body, failed_properties(error, job_id))

    @contextlib.asynccontextmanager
    async def _taken(self) -> AsyncIterator[tuple[Any, list[tuple[DeliveredMessage, FailedJob]]]]:
        """Every failed message, taken on a channel of its own that gives back the rest on exit."""
        channel = await self._client.channel()
        underlay = await channel.get_underlay_channel()
        try:
            taken: list[tuple[DeliveredMessage, FailedJob]] = []
            async with translated(f"read queue {self.name!r}"):
                while len(taken) < MOST_READ:
                    message = await underlay.basic_get(self.name, no_ack=False)
                    if not isinstance(message.delivery, spec.Basic.GetOk):
                        break
                    taken.append((message, read_failed(message, self._prefix)))
            yield underlay, taken
        finally:
            with contextlib.suppress(Exception):
                await channel.close()

    async def newest(self, queue: str | None, limit: int) -> list[FailedJob]:
        async with self._taken() as (_, taken):
            jobs = [job for _, job in taken if queue is None or job.job.queue == queue]
        jobs.sort(key=lambda failed: failed.failed_at, reverse=True)
        return jobs[:limit]

    async def take_out(self, job_id: str) -> QueuedJob | None:
        """Remove the failed job `job_id` from the store and return it (None: no such job)."""
        async with self._taken() as (underlay, taken):
            for message, failed in taken:
                if failed.job.id == job_id:
                    async with translated(f"remove a job from queue {self.name!r}"):
                        await underlay.basic_ack(message.delivery_tag)
                    return failed.job
        return None

    async def flush(self, queue: str | None) -> int:
        if queue is None:
            return await self._client.purge(self.name)
        count = 0
        removing = translated(f"remove jobs from queue {self.name!r}")
        async with self._taken() as (underlay, taken), removing:
            for message, failed in taken:
                if failed.job.queue == queue:
                    await underlay.basic_ack(message.delivery_tag)
                    count += 1
        return count


__all__ = ["FailedStore", "failed_properties", "read_failed"]
