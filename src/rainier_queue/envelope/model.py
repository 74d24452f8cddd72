# SPDX-License-Identifier: MIT
"""`QueuedJob`: what travels through a queue, and its stable JSON form.

A queued job outlives the process that dispatched it, and often the code
version too: a job pushed before a deploy is run by the worker after it. So
the envelope is plain data with a documented JSON form that is read
leniently (unknown keys are ignored, optional keys may be absent) and
written the same way every time. Nothing is ever pickled.

The JSON form, version 1:

```json
{
  "v": 1,
  "id": "0190d6c5-...",            // minted at dispatch; UUIDv7, sortable by time
  "name": "send-email",            // the job's stable wire name
  "payload": {"to": "a@b.c"},      // the job's fields, any JSON value
  "queue": "emails",
  "attempts": 0,                   // deliveries so far; 0 while waiting for the first
  "max_attempts": 3,
  "available_at": "2026-12-02T13:00:00.000000Z",
  "created_at": "2026-12-02T13:00:00.000000Z",
  "unique_key": "unique:send-email:42",      // present only when a uniqueness lock was taken
  "headers": {"traceparent": "00-..."}       // string to string; may be empty
}
```

Reading checks every field it finds (see `fields`): a wrong type, a
number out of range, a time that is not RFC 3339 or a `v` newer than this
code is a `MalformedEntry` naming the field, and a newer version is never
read as this one. An absent `v` is read as 1.

A driver's own bookkeeping (a stream id, a receipt handle, an offset) never
goes in here: it belongs to the `Reservation`, which is one delivery of the
job, not the job.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Self, TypeVar

from .._clock import utcnow
from ..errors import MalformedEntry
from .fields import (
    MAX_COUNT,
    WIRE_VERSION,
    count_field,
    headers_field,
    name_field,
    optional_text,
    parse_json,
    time_field,
    version_field,
)

JSONValue = Any
"""Any value `json.dumps` accepts. Spelled out for the reader; checked at dispatch."""


def new_job_id() -> str:
    """A UUIDv7: time-ordered, unique across processes without coordination."""
    [job_id] = new_job_ids(1)
    return job_id


def new_job_ids(count: int) -> list[str]:
    """`count` UUIDv7s made at once: one clock reading and one call for randomness.

    A bulk dispatch mints an id per job, so this is per-job cost: the
    milliseconds are formatted once, and each id is slices of one hex string
    of randomness (12 bits after the version, 62 after the variant).
    """
    millis = f"{(time.time_ns() // 1_000_000) & 0xFFFF_FFFF_FFFF:012x}"
    head = f"{millis[:8]}-{millis[8:]}-7"
    pool = os.urandom(10 * count).hex()
    v = _VARIANT
    return [
        f"{head}{pool[n : n + 3]}-{v[pool[n + 3]]}{pool[n + 4 : n + 7]}-{pool[n + 7 : n + 19]}"
        for n in range(0, 20 * count, 20)
    ]


_VARIANT = {f"{n:x}": "89ab"[n & 3] for n in range(16)}
"""A random hex digit to the variant's digit (0b10 then two of its random bits)."""


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds and a `Z`, the envelope's one time format."""
    # isoformat, not strftime: several times faster, and a four-digit year always.
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_time(text: str) -> datetime:
    """Read an RFC 3339 time; naive times are taken as UTC. `MalformedEntry` if it is not one."""
    return time_field(text, "time")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedJob:
    """One job as it waits in a queue."""

    id: str
    """Minted at dispatch and kept for the job's whole life, retries included."""
    name: str
    """The job's stable wire name; the registry key on the worker's side."""
    payload: JSONValue
    """The job's fields as JSON. Comes back exactly as it went in, `null` included."""
    queue: str = "default"
    attempts: int = 0
    """Deliveries so far. Counted when a worker reserves the job, so a delivery
    to a worker that died counts too."""
    max_attempts: int = 3
    available_at: datetime = field(default_factory=utcnow)
    """Earliest time the job may run. Delays are expressed only through this."""
    created_at: datetime = field(default_factory=utcnow)
    unique_key: str | None = None
    """The uniqueness lock this job holds, set only when dispatch took one."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Trace context and the like. Strings only."""

    @classmethod
    def create(
        cls,
        name: str,
        payload: JSONValue,
        *,
        queue: str = "default",
        max_attempts: int = 3,
        delay: timedelta | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Self:
        """A fresh envelope: new id, created now, available now or after `delay`."""
        now = utcnow()
        return cls(
            id=new_job_id(),
            name=name,
            payload=payload,
            queue=queue,
            max_attempts=max(1, max_attempts),
            available_at=now + delay if delay else now,
            created_at=now,
            headers=dict(headers or {}),
        )

    @property
    def is_available(self) -> bool:
        """Whether the job is due now."""
        return self.available_at <= utcnow()

    @property
    def is_exhausted(self) -> bool:
        """Whether every allowed attempt has been delivered."""
        return self.attempts >= self.max_attempts

    @classmethod
    def fresh(
        cls,
        job_id: str,
        name: str,
        payload: JSONValue,
        queue: str,
        max_attempts: int,
        available_at: datetime,
        created_at: datetime,
        headers: Mapping[str, str],
    ) -> Self:
        """A new, never-delivered envelope from fields already checked: bulk dispatch's path.

        Fills the slots directly, as `with_changes` does: the dataclass's own
        `__init__` costs several times as much, per job dispatched.
        """
        put = object.__setattr__
        made = object.__new__(cls)
        put(made, "id", job_id)
        put(made, "name", name)
        put(made, "payload", payload)
        put(made, "queue", queue)
        put(made, "attempts", 0)
        put(made, "max_attempts", max_attempts)
        put(made, "available_at", available_at)
        put(made, "created_at", created_at)
        put(made, "unique_key", None)
        put(made, "headers", headers)
        return made

    def with_changes(self, **changes: Any) -> Self:
        """A copy with some fields replaced (the envelope itself never changes).

        Every reserve makes one of these, so it fills the copy's slots
        directly: `dataclasses.replace` goes through `__init__` and costs
        half as much again, for nothing an envelope needs (it checks nothing).
        """
        unknown = changes.keys() - _ENVELOPE_FIELDS
        if unknown:
            raise TypeError(f"QueuedJob has no field(s) {', '.join(sorted(unknown))}")
        get, put = changes.get, object.__setattr__
        copy = object.__new__(type(self))
        put(copy, "id", get("id", self.id))
        put(copy, "name", get("name", self.name))
        put(copy, "payload", get("payload", self.payload))
        put(copy, "queue", get("queue", self.queue))
        put(copy, "attempts", get("attempts", self.attempts))
        put(copy, "max_attempts", get("max_attempts", self.max_attempts))
        put(copy, "available_at", get("available_at", self.available_at))
        put(copy, "created_at", get("created_at", self.created_at))
        put(copy, "unique_key", get("unique_key", self.unique_key))
        put(copy, "headers", get("headers", self.headers))
        return copy

    def to_dict(self) -> dict[str, JSONValue]:
        """The documented JSON form, as a dict."""
        data: dict[str, JSONValue] = {
            "v": WIRE_VERSION,
            "id": self.id,
            "name": self.name,
            "payload": self.payload,
            "queue": self.queue,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "available_at": format_time(self.available_at),
            "created_at": format_time(self.created_at),
        }
        if self.unique_key is not None:
            data["unique_key"] = self.unique_key
        data["headers"] = dict(self.headers)
        return data

    def to_json(self) -> str:
        """The documented JSON form, compact, as text."""
        return _ENVELOPE_JSON.encode(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> Self:
        """Read the JSON form leniently: unknown keys are ignored, optional ones may be absent.

        Everything present is checked, though: a field of the wrong type, a
        number out of range, a time that is not RFC 3339 or a version newer
        than this code is a `MalformedEntry` (a `PayloadError`) naming it.
        """
        if type(data) is dict:
            common = _common_envelope(cls, data, None, 0)
            if common is not None:
                return common
        if not isinstance(data, Mapping):
            kind = "an array" if isinstance(data, list) else type(data).__name__
            raise MalformedEntry("", f"a job envelope must be a JSON object, not {kind}")
        version_field(data.get("v"))
        if "payload" not in data:
            raise MalformedEntry("payload", "is missing")
        available, created = data.get("available_at"), data.get("created_at")
        available_at = None if available is None else time_field(available, "available_at")
        created_at = None if created is None else time_field(created, "created_at")
        if available_at is None or created_at is None:
            # The clock is read only for a producer that left a time out.
            now = utcnow()
            available_at, created_at = available_at or now, created_at or now
        queue = data.get("queue")
        return cls(
            id=name_field(data.get("id"), "id"),
            name=name_field(data.get("name"), "name"),
            payload=data["payload"],
            queue="default" if queue is None or queue == "" else name_field(queue, "queue"),
            attempts=count_field(data.get("attempts", 0), "attempts", least=0),
            max_attempts=count_field(data.get("max_attempts", 1), "max_attempts", least=1),
            available_at=available_at,
            created_at=created_at,
            unique_key=optional_text(data.get("unique_key"), "unique_key"),
            headers=headers_field(data.get("headers")),
        )

    @classmethod
    def from_delivery(cls, data: object, *, queue: str | None = None, delivered: int = 0) -> Self:
        """`from_dict` as a reserve hands it out: `delivered` more attempts, and the queue
        it came from (if given) in place of the one written.

        The same checks as `from_dict`, on the fields as stored; what this
        saves is the copy `with_changes` made per reserved job, since the
        envelope a driver reads is built with the delivery counted.
        """
        if type(data) is dict:
            common = _common_envelope(cls, data, queue, delivered)
            if common is not None:
                return common
        read = cls.from_dict(data)
        return read.with_changes(
            queue=read.queue if queue is None else queue, attempts=read.attempts + delivered
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """Read the JSON form from text; a `MalformedEntry` naming what is wrong otherwise."""
        data = parse_json(text, "the envelope")
        return cls.from_dict(data)


_ENVELOPE_FIELDS = frozenset(f.name for f in fields(QueuedJob))

_Job = TypeVar("_Job", bound=QueuedJob)


def _common_envelope(
    cls: type[_Job], data: dict[str, JSONValue], delivered_on: str | None, delivered: int
) -> _Job | None:
    """`data` as a job if it is what this library writes, checked by type and range only.

    The job is built with `delivered` added to its attempts and, if
    `delivered_on` is given, that queue in place of its own (`from_delivery`).

    Every reserve on Redis and Kafka reads its envelopes here, so this is the
    per-job cost of the checks; anything unusual (a missing time, headers
    that are not all text, a number out of range) returns None and goes
    through the field-by-field reading, which names what is wrong.
    """
    get = data.get
    job_id, name, queue = get("id"), get("name"), get("queue")
    attempts, max_attempts = get("attempts"), get("max_attempts")
    available, created = get("available_at"), get("created_at")
    version, key, headers = get("v"), get("unique_key"), get("headers")
    if not (
        type(job_id) is str
        and job_id
        and type(name) is str
        and name
        and type(queue) is str
        and queue
        and type(attempts) is int
        and 0 <= attempts <= MAX_COUNT
        and type(max_attempts) is int
        and 1 <= max_attempts <= MAX_COUNT
        and type(available) is str
        and type(created) is str
        and (version is None or (type(version) is int and version == WIRE_VERSION))
        and (key is None or type(key) is str)
        and (not headers or (type(headers) is dict and _all_text(headers)))
        and "payload" in data
    ):
        return None
    try:
        available_at = time_field(available, "available_at")
        created_at = time_field(created, "created_at")
    except MalformedEntry:
        return None
    return cls(
        id=job_id,
        name=name,
        payload=data["payload"],
        queue=queue if delivered_on is None else delivered_on,
        attempts=attempts + delivered,
        max_attempts=max_attempts,
        available_at=available_at,
        created_at=created_at,
        unique_key=key,
        headers=dict(headers) if headers else {},
    )


def _all_text(headers: dict[str, JSONValue]) -> bool:
    return all(type(value) is str for value in headers.values())


# Made once: `json.dumps` with any option builds a new encoder per call (see encoding.py).
_ENVELOPE_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
