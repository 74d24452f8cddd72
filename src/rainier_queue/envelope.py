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
  "unique_key": "rq:unique:send-email:42",   // present only when a uniqueness lock was taken
  "headers": {"traceparent": "00-..."}       // string to string; may be empty
}
```

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
from typing import Any, Self

from ._clock import utcnow
from .errors import PayloadError

JSONValue = Any
"""Any value `json.dumps` accepts. Spelled out for the reader; checked at dispatch."""

WIRE_VERSION = 1


def new_job_id() -> str:
    """A UUIDv7: time-ordered, unique across processes without coordination."""
    rand = os.urandom(10)
    millis = (time.time_ns() // 1_000_000) & 0xFFFF_FFFF_FFFF
    # 48 bits of milliseconds; version 7 over 12 random bits; variant 0b10 over 62.
    raw = millis.to_bytes(6, "big") + bytes((0x70 | rand[0] & 0x0F, rand[1], 0x80 | rand[2] & 0x3F))
    text = (raw + rand[3:]).hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds and a `Z`, the envelope's one time format."""
    # isoformat, not strftime: several times faster, and a four-digit year always.
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_time(text: str) -> datetime:
    """Read an RFC 3339 time; naive times are taken as UTC."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    if moment.tzinfo is UTC:  # what `format_time` writes, so nearly always
        return moment
    return moment.astimezone(UTC)


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
    def from_dict(cls, data: Mapping[str, JSONValue]) -> Self:
        """Read the JSON form leniently; unknown keys are ignored.

        Raises `PayloadError` when the data is not a job envelope at all.
        """
        if not isinstance(data, Mapping):
            raise PayloadError(
                f"not a job envelope: expected a JSON object, got {type(data).__name__}"
            )
        missing = [k for k in ("id", "name") if not isinstance(data.get(k), str) or not data[k]]
        if missing or "payload" not in data:
            missing += [] if "payload" in data else ["payload"]
            raise PayloadError(
                "not a job envelope: missing or empty " + ", ".join(f"`{k}`" for k in missing)
            )
        try:
            available_text = data.get("available_at")
            created_text = data.get("created_at")
            # The clock is read only for a producer that left a time out.
            if available_text is None or created_text is None:
                now = utcnow()
                available_at = now if available_text is None else parse_time(available_text)
                created_at = now if created_text is None else parse_time(created_text)
            else:
                available_at, created_at = parse_time(available_text), parse_time(created_text)
            headers = data.get("headers")
            return cls(
                id=data["id"],
                name=data["name"],
                payload=data["payload"],
                queue=str(data.get("queue") or "default"),
                attempts=max(0, int(data.get("attempts", 0))),
                max_attempts=max(1, int(data.get("max_attempts", 1))),
                available_at=available_at,
                created_at=created_at,
                unique_key=data.get("unique_key"),
                headers={str(k): str(v) for k, v in dict(headers).items()} if headers else {},
            )
        except (TypeError, ValueError) as exc:
            raise PayloadError(f"not a job envelope: {exc}") from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """Read the JSON form from text; a clear `PayloadError` for anything else."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PayloadError(f"not a job envelope: the body is not JSON ({exc})") from exc
        return cls.from_dict(data)


_ENVELOPE_FIELDS = frozenset(f.name for f in fields(QueuedJob))


# Encoders made once, not per payload: `json.dumps` with any non-default option
# builds a new encoder, and its C core, on every call, which a bulk push of many
# small payloads pays per job. The C core is the one `json` itself uses, but
# built without circular-reference bookkeeping (its table is left dirty by a
# failed call, so it cannot be shared between calls); a circular payload still
# fails, as too deep to encode.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ENVELOPE_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_c_compact: Any = (
    None
    if _C_ENCODER is None
    else _C_ENCODER(
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
)


def encode_payload(payload: JSONValue) -> str:
    """Payload as compact JSON text, or a `PayloadError` naming what is not JSON."""
    try:
        if _c_compact is None:
            return _COMPACT.encode(payload)
        return "".join(_c_compact(payload, 0))
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"the payload is not JSON-serialisable: {exc}") from exc
    except RecursionError:
        raise PayloadError(
            "the payload is not JSON-serialisable: it refers to itself, or is nested too deeply"
        ) from None


def encode_headers(headers: Mapping[str, str]) -> str:
    """Headers as compact JSON text (`{}` when there are none, as there mostly are)."""
    return _COMPACT.encode(dict(headers)) if headers else "{}"


def decode_payload(text: str) -> JSONValue:
    """The inverse of `encode_payload`."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise PayloadError(f"a stored payload is not JSON: {exc}") from exc
