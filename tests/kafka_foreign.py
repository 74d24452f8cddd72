# SPDX-License-Identifier: MIT
"""Records as a producer that is not this library writes them, for the Kafka tests.

Jobs in the documented JSON form written by hand, and values that are not
jobs in each of the ways the read path must survive, each with the words its
error has to contain. Produced with a plain aiokafka producer, one request
per record (Tansu's end offsets are right only for one record per batch).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiokafka import AIOKafkaProducer

from .kafka_broker import KafkaBroker

NOW = "2026-01-01T00:00:00.000000Z"


def envelope(**changes: Any) -> dict[str, Any]:
    """A job in the documented JSON form, written by hand as another program would."""
    data: dict[str, Any] = {
        "v": 1,
        "id": f"hand-{uuid.uuid4().hex}",
        "name": "note",
        "payload": {"text": "hello"},
        "queue": "foreign",
        "attempts": 0,
        "max_attempts": 3,
        "available_at": NOW,
        "created_at": NOW,
        "headers": {},
    }
    data.update(changes)
    return data


def text(data: object) -> bytes:
    return json.dumps(data).encode()


DEEP = "[" * 10_000 + "]" * 10_000

MALFORMED: dict[str, tuple[bytes | None, str]] = {
    "not-utf8": (b"\xff\xfe{\x00garbage", "not valid UTF-8"),
    "not-json": (b"{this is not json", "not JSON"),
    "array": (b"[1, 2, 3]", "must be a JSON object"),
    "deep": (text(envelope())[:-1] + b',"payload":' + DEEP.encode() + b"}", "nested more than"),
    "attempts": (text(envelope()).replace(b'"attempts": 0', b'"attempts": 1e999'), "`attempts`"),
    "created": (text(envelope(created_at="yesterday")), "`created_at`"),
    "version": (text(envelope(v=99)), "newer rainier-queue"),
    "surrogate": (text(envelope()).replace(b'"hello"', b'"a\\ud800b"'), "lone surrogate"),
    "no-value": (None, "no value"),
}
"""Per record key: the value a foreign producer wrote, and what the error must say."""


async def produce_foreign(tansu: KafkaBroker, topic: str, records: list[tuple[bytes, Any]]) -> None:
    """Produce (key, value) records as a plain producer would, one request each (Tansu offsets)."""
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap, max_request_size=4_000_000)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key, headers=[("source", b"elsewhere")])
    finally:
        await producer.stop()


__all__ = ["MALFORMED", "envelope", "produce_foreign", "text"]
