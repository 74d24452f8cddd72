# SPDX-License-Identifier: MIT
"""What a queue is called on the broker and in the lock store.

Every name here is a promise to whoever runs the cluster: they create the
topic a queue maps to by hand, so the mapping must be obvious for ordinary
names and must never send two queues to one topic. Kafka allows only
`[A-Za-z0-9._-]` in a topic name, up to 249 characters; this library allows
any printable queue name. So a queue name made of letters, digits, `_` and
`-` is its own topic name, and every other byte (the dot included) is
written as `.` and two hex digits: `émails ✉` becomes `.c3.a9mails.20.e2.9c.89`.

Escaping the dot is what keeps the failed-jobs topic apart: `{topic}.failed`
can never be another queue's topic, because a queue name's own dots are
always followed by two hex digits, and `.fa` is a byte UTF-8 never uses.

The lock store keys carry the group, the topic and the partition, so two
deployments reading one topic under different groups never share a cursor
(nor count each other's workers when sharing out the partitions).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from ...errors import ConfigurationError

FAILED_SUFFIX = ".failed"
"""Appended to a queue's topic to name the topic its exhausted jobs go to."""

MAX_TOPIC_LENGTH = 249
_PLAIN = frozenset((string.ascii_letters + string.digits + "_-").encode())
_LEGAL = re.compile(r"[A-Za-z0-9._-]*")


def check_prefix(given: object) -> str:
    """A topic prefix is used as it is, so it must already be legal in a topic name."""
    prefix = str(given)
    if not _LEGAL.fullmatch(prefix):
        raise ConfigurationError(
            f"the Kafka `topic_prefix` {prefix!r} may use only letters, digits, `.`, `_` and `-`"
        )
    return prefix


def encode_queue(queue: str) -> str:
    """The queue name as it appears in a topic name (see the module docstring)."""
    out: list[str] = []
    for byte in queue.encode("utf-8", "surrogatepass"):
        out.append(chr(byte) if byte in _PLAIN else f".{byte:02x}")
    return "".join(out)


def decode_queue(encoded: str) -> str | None:
    """The queue name an encoded one stands for, or None if `encode_queue` never writes it."""
    data = bytearray()
    at = 0
    while at < len(encoded):
        char = encoded[at]
        if char == "." and re.fullmatch(r"[0-9a-f]{2}", encoded[at + 1 : at + 3]):
            data.append(int(encoded[at + 1 : at + 3], 16))
            at += 3
        elif char.isascii() and ord(char) in _PLAIN:
            data.append(ord(char))
            at += 1
        else:
            return None
    try:
        queue = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return queue if queue and encode_queue(queue) == encoded else None


def queue_of_failed_topic(prefix: str, topic: str) -> str | None:
    """The queue whose failed topic `topic` is (under `prefix`), or None if it is no such topic."""
    if not topic.startswith(prefix) or not topic.endswith(FAILED_SUFFIX):
        return None
    return decode_queue(topic[len(prefix) : -len(FAILED_SUFFIX)])


def topic_name(prefix: str, queue: str) -> str:
    """The topic a queue's jobs are records on: the prefix, then the encoded queue name."""
    topic = prefix + encode_queue(queue)
    if not queue or len(topic) + len(FAILED_SUFFIX) > MAX_TOPIC_LENGTH:
        raise ConfigurationError(
            f"the queue name {queue!r} makes the Kafka topic name {topic!r}, which is "
            f"{'empty' if not queue else 'too long'}: with its `{FAILED_SUFFIX}` twin it must "
            f"fit in {MAX_TOPIC_LENGTH} characters; use a shorter queue name or topic prefix"
        )
    return topic


def failed_topic_name(prefix: str, queue: str) -> str:
    """The topic a queue's exhausted jobs are produced to."""
    return topic_name(prefix, queue) + FAILED_SUFFIX


def paused_key(group: str, topic: str) -> str:
    """The lock store key that marks a queue paused for one group's workers."""
    return f"kafka-paused:{group}:{topic}"


def batch_prefix(group: str, topic_prefix: str) -> str:
    """What the lock store keys of one group's batches start with (`cached_batches.py`)."""
    return f"kafka-batch:{group}:{topic_prefix}:"


def lease_name(group: str, topic: str, partition: int) -> str:
    """The lock one partition's lease is held under (the lock manager adds its prefix)."""
    return f"kafka:{group}:{topic}:{partition}"


def cursor_key(group: str, topic: str, partition: int) -> str:
    """The cache key holding the next offset the group will run in a partition (partitions.py)."""
    return f"kafka-cursor:{group}:{topic}:{partition}"


def member_name(group: str, topic: str, seat: int) -> str:
    """The lock a worker serving a topic holds as one of its seats (see membership.py)."""
    return f"kafka-member:{group}:{topic}:{seat}"


def wanting_key(group: str, topic: str) -> str:
    """The cache key a worker below its share of a topic's partitions sets while it waits."""
    return f"kafka-wanting:{group}:{topic}"


@dataclass(frozen=True, slots=True)
class KafkaPosition:
    """Where a record sits in the log. A reservation's handle; never part of the job."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"


def attempt_number(recorded: int, delivered: int) -> int:
    """Which attempt a delivery is: the count the record carries plus this offset's deliveries.

    Both halves are needed. A retry is a new record at a new offset, so it
    carries the attempts spent before it (`recorded`); a crash leaves the
    cursor where it was and the same offset is handed out again, which only
    the per-offset counter (`delivered`) notices.
    """
    return max(1, recorded + delivered)


__all__ = [
    "FAILED_SUFFIX",
    "KafkaPosition",
    "attempt_number",
    "check_prefix",
    "cursor_key",
    "decode_queue",
    "encode_queue",
    "failed_topic_name",
    "lease_name",
    "member_name",
    "paused_key",
    "queue_of_failed_topic",
    "topic_name",
    "wanting_key",
]
