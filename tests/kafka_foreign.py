# SPDX-License-Identifier: MIT
"""Records as a producer that is not this library writes them, for the Kafka tests.

Produced with a plain aiokafka producer, one request per record (Tansu's end
offsets are right only for one record per batch), each with a header of its
own, as another program's records carry. What they hold is the contract
suite's catalog (tests/foreign/catalog.py), planted by the Kafka backend.
"""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer

from .kafka_broker import KafkaBroker


async def produce_foreign(tansu: KafkaBroker, topic: str, records: list[tuple[bytes, Any]]) -> None:
    """Produce (key, value) records as a plain producer would, one request each (Tansu offsets)."""
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap, max_request_size=4_000_000)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key, headers=[("source", b"elsewhere")])
    finally:
        await producer.stop()


__all__ = ["produce_foreign"]
