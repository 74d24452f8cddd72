# SPDX-License-Identifier: MIT
"""Reading what storage holds: every entry becomes a job or a malformed record, nothing else.

Our storage is not ours alone. A service in another language, a migration
script, a person at `psql` or `redis-cli`, a producer on a shared topic or
an older or newer release of this library may all write into it. A worker
that raises on the first entry it cannot read stops the whole queue behind
that entry, on every worker at once, and a crash inside a transaction can
undo other jobs' acknowledgements with it. So the read path is *total*:
the functions here take whatever a driver fetched and return either a
`QueuedJob` or a `Malformed` (why, naming the field, and the entry as it
was), and they never raise. The driver then records a `Malformed` in its
failed store, where `rainier-queue failed` lists it, and goes on.

Limits are checked before anything recurses: a payload nested deeper than
`MAX_DEPTH` or larger than `MAX_ENTRY_BYTES` is refused from its text, not
by a `RecursionError` halfway through parsing it. Text that is not valid
UTF-8 (or JSON escapes that decode to a lone surrogate, which no UTF-8 store
can hold) is refused too, so that nothing we hand on can fail to be written
back or printed later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from .._clock import from_micros, utcnow
from ..errors import MalformedEntry
from .fields import (
    EARLIEST_MICROS,
    FAST_JSON,
    LATEST_MICROS,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_ENTRY_BYTES,
    as_text,
    check_depth,
    count_field,
    headers_field,
    micros_field,
    name_field,
    optional_text,
    parse_json,
    raw_value,
)
from .model import JSONValue, QueuedJob

NOT_A_JOB = "rainier-queue:not-a-job"
"""The name a malformed entry is failed under: no handler has it, so a retry fails again
until someone repairs the entry by hand."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """A stored entry that could not be read as a job: why, and the entry itself.

    `raw` is the entry as JSON-safe data: text stays text, bytes that are not
    UTF-8 become `{"base64": "..."}`, so it can be listed, printed and written
    to any failed store without failing a second time.
    """

    reason: str
    """What was wrong, naming the field: "`attempts` must be a whole number, not 'abc'"."""
    raw: JSONValue
    id: str | None = None
    """The entry's own id, where it had a usable one."""
    queue: str | None = None

    @property
    def error(self) -> str:
        """The error recorded with the entry in the failed store."""
        return (
            f"not a job: {self.reason}. The entry was written by something other than this "
            "version of rainier-queue; it is kept as it was stored. Repair it and retry it, "
            "or forget it."
        )

    def as_job(self, *, queue: str, job_id: str) -> QueuedJob:
        """An envelope that carries the entry into a failed store, under `NOT_A_JOB`."""
        now = utcnow()
        return QueuedJob(
            id=self.id or job_id,
            name=NOT_A_JOB,
            payload={"raw": self.raw},
            queue=self.queue or queue,
            attempts=1,
            max_attempts=1,
            available_at=now,
            created_at=now,
        )


# -- whole entries ---------------------------------------------------------------------


def read_envelope(
    body: object, *, field: str = "body", queue: str | None = None, delivered: int = 0
) -> QueuedJob | Malformed:
    """A job from its stored JSON text (Redis, Kafka), or a `Malformed`. Never raises.

    `field` names where the text was (a stream entry's `body`, a record's `value`).
    A reserve passes the deliveries to count and the queue the entry came
    from (`QueuedJob.from_delivery`); the entry is checked as it was stored.
    """
    try:
        return QueuedJob.from_delivery(parse_json(body, field), queue=queue, delivered=delivered)
    except MalformedEntry as exc:
        return Malformed(reason=exc.reason, raw=raw_value(body), id=_usable_id(body))
    except Exception as exc:  # the one place that keeps a surprise from stopping the worker
        return Malformed(reason=_unexpected(exc), raw=raw_value(body))


def read_columns(row: tuple[Any, ...] | list[Any], *, delivered: int = 0) -> QueuedJob | Malformed:
    """A job from the SQL drivers' columns (`ENVELOPE` order), or a `Malformed`. Never raises.

    `delivered` is added to the stored attempts, checked as stored: a claim
    that read the row before counting its delivery gets the job with the
    delivery counted, without a second copy of it.
    """
    try:
        common = _common_row(row, delivered)
        if common is not None:
            return common
        job_id, queue, name, payload, headers, attempts, max_attempts, available, created, key = row
        return QueuedJob(
            id=name_field(job_id, "id"),
            name=name_field(name, "name"),
            payload=parse_json(payload, "payload"),
            queue=name_field(queue, "queue"),
            attempts=count_field(attempts, "attempts", least=0) + delivered,
            max_attempts=count_field(max_attempts, "max_attempts", least=1),
            available_at=micros_field(available, "available_at"),
            created_at=micros_field(created, "created_at"),
            unique_key=optional_text(key, "unique_key"),
            headers=(
                {}
                if headers in ("{}", b"{}", "", b"")
                else headers_field(parse_json(headers, "headers"))
            ),
        )
    except MalformedEntry as exc:
        reason = exc.reason
    except Exception as exc:
        reason = _unexpected(exc)
    raw = {column: raw_value(value) for column, value in zip(COLUMNS, row, strict=False)}
    job_id, queue = raw.get("id"), raw.get("queue")
    return Malformed(
        reason=reason,
        raw=raw,
        id=job_id if isinstance(job_id, str) and job_id else None,
        queue=queue if isinstance(queue, str) and queue else None,
    )


def _common_row(row: tuple[Any, ...] | list[Any], delivered: int) -> QueuedJob | None:
    """The row as a job if it is the kind this library writes (plain ASCII text, whole
    numbers in range, no headers), checked in a few type and range tests; None for
    anything else, which the full checks then read field by field.

    Every reserve reads its rows here, so this is the per-job cost of the
    checks; the full path costs about half as much again.
    """
    job_id, queue, name, payload, headers, attempts, max_attempts, available, created, key = row
    if not (
        type(job_id) is str
        and type(name) is str
        and type(queue) is str
        and type(payload) is str
        and type(attempts) is int
        and type(max_attempts) is int
        and type(available) is int
        and type(created) is int
        and headers == "{}"
        and (key is None or (type(key) is str and key.isascii()))
        and job_id
        and name
        and queue
        and 0 <= attempts <= MAX_COUNT
        and 1 <= max_attempts <= MAX_COUNT
        and EARLIEST_MICROS <= available <= LATEST_MICROS
        and EARLIEST_MICROS <= created <= LATEST_MICROS
        and len(payload) <= MAX_ENTRY_BYTES
        and payload.isascii()
        and job_id.isascii()
        and name.isascii()
        and queue.isascii()
        and "\\u" not in payload
        and payload.count("[") + payload.count("{") <= MAX_DEPTH
    ):
        return None
    try:
        data = FAST_JSON.decode(payload)
    except (msgspec.MsgspecError, RecursionError):
        return None  # read again field by field, where `STRICT_JSON` says what is wrong
    return QueuedJob(
        id=job_id,
        name=name,
        payload=data,
        queue=queue,
        attempts=attempts + delivered,
        max_attempts=max_attempts,
        available_at=from_micros(available),
        created_at=from_micros(created),
        unique_key=key,
        headers={},
    )


COLUMNS = (
    "id",
    "queue",
    "name",
    "payload",
    "headers",
    "attempts",
    "max_attempts",
    "available_at",
    "created_at",
    "unique_key",
)
"""The SQL drivers' envelope columns, in the order `read_columns` takes them
(the drivers' `statements.ENVELOPE`)."""


def _usable_id(body: object) -> str | None:
    """The entry's `id`, when it is an object with a plain text id (so the record keeps it)."""
    try:
        text = as_text(body, "entry")
        check_depth(text)
        data = json.loads(text)
    except Exception:
        return None
    job_id = data.get("id") if isinstance(data, dict) else None
    return job_id if isinstance(job_id, str) and job_id and job_id.isprintable() else None


def _unexpected(exc: BaseException) -> str:
    return f"could not be read ({type(exc).__name__}: {exc})"


__all__ = ["COLUMNS", "NOT_A_JOB", "Malformed", "read_columns", "read_envelope"]
