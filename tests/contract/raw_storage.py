# SPDX-License-Identifier: MIT
"""The `raw` hook: every byte a driver stored for a queue, read as another program would.

The encryption promise (docs/encryption.md) is about what storage holds,
so it is checked against storage itself, read with each server's own
client and not through the driver: the SQL tables' rows, every Redis key of
the namespace, the Kafka topic's records, the NATS stream's messages, the
RabbitMQ queue's messages (taken and put back unacknowledged).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

Raw = Callable[[Path, str, str], Coroutine[Any, Any, list[bytes]]]
"""(tmp, namespace, queue) -> what is stored for that queue, entry by entry, as bytes."""


def _row_bytes(rows: list[tuple[Any, ...]]) -> list[bytes]:
    return [repr(row).encode() for row in rows]


async def sqlite_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    with sqlite3.connect(tmp / "queue.db") as conn:
        rows = conn.execute(f"SELECT * FROM {namespace}_jobs").fetchall()
        rows += conn.execute(f"SELECT * FROM {namespace}_failed_jobs").fetchall()
    return _row_bytes(rows)


async def postgres_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    import psycopg

    from ..postgres import PG_URL

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(f"SELECT * FROM {namespace}_jobs").fetchall()
        rows += conn.execute(f"SELECT * FROM {namespace}_failed_jobs").fetchall()
    return _row_bytes(rows)


async def mysql_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    import pymysql  # type: ignore[import-untyped]

    conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", database="test")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{namespace}_jobs`")
            rows = list(cur.fetchall())
            cur.execute(f"SELECT * FROM `{namespace}_failed_jobs`")
            rows += list(cur.fetchall())
    finally:
        conn.close()
    return _row_bytes(rows)


async def redis_keys_raw(client: Any, namespace: str) -> list[bytes]:
    """Every value under the namespace's keys, whatever the key's type."""
    found: list[bytes] = []
    async for key in client.scan_iter(match=f"rq:{namespace}:*", count=1000):
        kind = (await client.type(key)).decode()
        if kind == "stream":
            found += [repr(fields).encode() for _, fields in await client.xrange(key)]
        elif kind == "zset":
            found += await client.zrange(key, 0, -1)
        elif kind == "list":
            found += await client.lrange(key, 0, -1)
        elif kind == "hash":
            found += [repr(item).encode() for item in (await client.hgetall(key)).items()]
        elif kind == "string":
            found.append(await client.get(key))
    return found


async def redis_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    try:
        return await redis_keys_raw(client, namespace)
    finally:
        await client.aclose()


async def kafka_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from rainier_queue.drivers.kafka.names import topic_name

    from ..kafka_broker import broker

    topic = topic_name(f"{namespace}.", queue)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker().bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or {0}]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        found: list[bytes] = []
        while [p for p in partitions if await consumer.position(p) < ends[p]]:
            batches = await consumer.getmany(*partitions, timeout_ms=1000)
            for records in batches.values():
                found += [record.value or b"" for record in records]
        return found
    finally:
        await consumer.stop()


async def nats_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    import nats

    from rainier_queue.drivers.nats.names import Names

    client = await nats.connect("nats://127.0.0.1:4222")
    try:
        js = client.jetstream()
        names = Names(namespace)
        found: list[bytes] = []
        for stream in (names.stream, names.failed_stream):
            state = (await js.stream_info(stream)).state
            if not state.messages:
                continue
            for seq in range(max(state.first_seq, 1), state.last_seq + 1):
                try:
                    found.append((await js.get_msg(stream, seq)).data or b"")
                except nats.js.errors.NotFoundError:
                    continue  # acknowledged and gone
        return found
    finally:
        await client.close()


async def rabbitmq_raw(tmp: Path, namespace: str, queue: str) -> list[bytes]:
    """Take every message of the work queue unacknowledged, then close: all go back."""
    import aio_pika

    from rainier_queue.drivers.rabbitmq.names import work_queue

    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    try:
        channel = await connection.channel()
        source = await channel.get_queue(work_queue(f"{namespace}.", queue), ensure=False)
        found: list[bytes] = []
        while (message := await source.get(no_ack=False, fail=False)) is not None:
            found.append(message.body)
        await channel.close()  # unacknowledged: every message is put back
        return found
    finally:
        await connection.close()
