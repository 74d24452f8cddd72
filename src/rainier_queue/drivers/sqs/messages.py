# SPDX-License-Identifier: MIT
"""A job as an SQS message, and back: the body, the delay, and the attempt it is on.

- The body is the job's JSON envelope, nothing else, so a consumer in
  another language reads it as documented (docs/payloads.md).
- A delay SQS can hold (`DelaySeconds`, up to 900 s, standard queues only)
  is sent as one, rounded up to the second, so a job is never early. A
  longer one, or any delay on a FIFO queue (which takes no per-message
  delay), is *carried*: the message goes with `DelaySeconds` as long as SQS
  allows and an `rq-delay-ms` attribute with the whole delay; the first
  worker to receive it early hides it (a visibility change) until it is due
  by the server's clock (its `SentTimestamp` plus the delay, against the
  `Date` of the receive's answer). Either way the delay is measured on
  SQS's clock, not the producer's.
- Attempts are the envelope's plus SQS's `ApproximateReceiveCount`, so a
  delivery to a worker that died counts; an early receive of a carried
  delay is not an attempt and is taken off (one per 12 hours of delay that
  was left at the first receive).
- On a FIFO queue a job with an ordering key goes to its key's message group
  (`key:` and the key, or their hash), so SQS hands out the group's messages
  one at a time in order; every other job is its own group, so a held or
  delayed job without a key never holds up another. Its deduplication id is
  the job id on a push (a push repeated within SQS's 5 minutes is one job),
  and fresh for a job sent again by a release.
- A delayed job without an ordering key on a FIFO queue goes to the queue's
  standard delay queue instead (delays.py), with the deduplication id its
  move to the FIFO queue will use in an `rq-dedup` attribute.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...errors import PayloadError
from ...job import ORDERING_KEY
from .settings import MAX_DELAY, MAX_VISIBILITY

DELAY_ATTRIBUTE = "rq-delay-ms"
DEDUP_ATTRIBUTE = "rq-dedup"
"""On a delay queue's message: the deduplication id its move to the FIFO queue sends."""
SYSTEM_ATTRIBUTES = [
    "ApproximateReceiveCount",
    "SentTimestamp",
    "ApproximateFirstReceiveTimestamp",
    "MessageGroupId",
]
_ID = re.compile(r"^[A-Za-z0-9!-/:-@\[-`{-~]{1,128}$")


def fifo_id(text: str) -> str:
    """`text` as a FIFO group or deduplication id (SQS's characters, at most 128), else its hash."""
    if _ID.match(text):
        return text
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def ordering_key(job: QueuedJob) -> str | None:
    """The job's ordering key, or None."""
    return job.headers.get(ORDERING_KEY) if job.headers else None


def group_of(job: QueuedJob) -> str:
    """A job's FIFO message group: its ordering key's (`key:` before it, so no job id can
    share it), or one of its own, so a held or delayed job without a key holds up no other."""
    key = ordering_key(job)
    return fifo_id(job.id) if key is None else fifo_id(f"key:{key}")


def delay_of(job: QueuedJob) -> timedelta:
    """How long from now the job is due (by the clock that pushes it: a length, not a moment)."""
    return max(timedelta(0), job.available_at - utcnow())


def entry(
    job: QueuedJob,
    *,
    fifo: bool,
    max_size: int,
    dedup: str | None = None,
    delay: timedelta | None = None,
    moved_dedup: str | None = None,
) -> dict[str, Any]:
    """The `SendMessage` arguments for `job` (no queue URL): `PayloadError` if it is too big.

    `moved_dedup`: the message goes to a delay queue (a standard queue, so `fifo` is
    False), and this is the deduplication id its move to the FIFO queue sends."""
    body = job.to_json()
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > max_size:
        raise PayloadError(
            f"job {job.id} ({job.name}) is {size} bytes as JSON, over the {max_size} bytes an "
            "SQS message may hold here (`max_message_size`); nothing was sent: keep large data "
            "elsewhere (S3, a database) and put its key in the payload"
        )
    args: dict[str, Any] = {"MessageBody": body}
    attributes: dict[str, Any] = {}
    wait = delay_of(job) if delay is None else delay
    if wait > timedelta(0):
        seconds = math.ceil(wait.total_seconds())
        if not fifo:
            args["DelaySeconds"] = min(seconds, int(MAX_DELAY.total_seconds()))
        if fifo or seconds > MAX_DELAY.total_seconds():
            attributes[DELAY_ATTRIBUTE] = {
                "DataType": "Number",
                "StringValue": str(math.ceil(wait.total_seconds() * 1000)),
            }
    if moved_dedup is not None:
        attributes[DEDUP_ATTRIBUTE] = {"DataType": "String", "StringValue": moved_dedup}
    if attributes:
        args["MessageAttributes"] = attributes
    if fifo:
        args["MessageGroupId"] = group_of(job)
        args["MessageDeduplicationId"] = fifo_id(dedup or job.id)
    return args


def raw_entry(body: str, *, fifo: bool) -> dict[str, Any]:
    """A bare body, for `push_raw`: a FIFO queue needs a group and a deduplication id."""
    args: dict[str, Any] = {"MessageBody": body}
    if fifo:
        digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()
        args["MessageGroupId"] = digest[:64]
        args["MessageDeduplicationId"] = f"raw-{digest[:40]}-{time.time_ns()}"
    return args


@dataclass(frozen=True, slots=True)
class Received:
    """What a received message says about its delivery."""

    receive_count: int
    hide_for: int
    """Seconds to hide it for, when a carried delay has not run out; else 0."""
    early: int
    """Receives of it made before it was due (a carried delay): not attempts."""


def received(message: dict[str, Any], server_now: float | None) -> Received:
    """Read a received message's attributes (`server_now`: the answer's `Date`, in seconds)."""
    attributes = message.get("Attributes", {})
    count = _int(attributes.get("ApproximateReceiveCount"), 1)
    carried = message.get("MessageAttributes", {}).get(DELAY_ATTRIBUTE)
    if carried is None:
        return Received(count, 0, 0)
    due = _int(attributes.get("SentTimestamp"), 0) + _int(carried.get("StringValue"), 0)
    now = (server_now if server_now is not None else time.time()) * 1000
    most = int(MAX_VISIBILITY.total_seconds())
    if due > now:
        return Received(count, min(most, math.ceil((due - now) / 1000)), 0)
    first = _int(attributes.get("ApproximateFirstReceiveTimestamp"), due)
    early = math.ceil((due - first) / (most * 1000)) if first < due else 0
    return Received(count, 0, early)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


__all__ = [
    "DEDUP_ATTRIBUTE",
    "DELAY_ATTRIBUTE",
    "SYSTEM_ATTRIBUTES",
    "Received",
    "delay_of",
    "entry",
    "fifo_id",
    "group_of",
    "ordering_key",
    "raw_entry",
    "received",
]
