# SPDX-License-Identifier: MIT
"""The record store on NATS: a JetStream key-value bucket beside the connection's streams.

Why a part of its own: worker heartbeats, succeeded records and results
(`jobstate.py`) need small records with a time to live, and JetStream's
key-value buckets are the server's own answer to that. The bucket
`<prefix>-records` is made the first time a record is written (or by
`rainier-queue provision`), with the stream's storage and replicas: it
holds no jobs, and its shape is fixed, so no decision of the operator's is
taken for them.

A bucket's entries all live as long as the bucket's `max_age`, and the
servers this targets (2.9) have no time to live per entry. So each value
carries its own expiry and a read skips an expired one, and the bucket's
`max_age` (`KEPT_AT_MOST`, a week) bounds how long anything stays: a record
asked to stay longer (a `keep_result` of a month) is gone after a week.

Keys are `<kind>.<name in URL-safe base64>` (`worker.…`, `job.…`), since a
key may hold only letters, digits and `-/_=.`; listing heartbeats reads the
keys under `worker.>` alone, however many job records there are.

A stream cannot be searched by a field of its messages, so NATS finds no
job by id (`job_lookup` stays False): `status` answers `unknown`, saying so.
"""

from __future__ import annotations

import base64
import time
from datetime import timedelta

import nats.js.errors as jx
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from .connection import NATSConnection, translated
from .names import Names
from .settings import NATSSettings

KEPT_AT_MOST = timedelta(days=7)
"""The bucket's `max_age`: no record outlives it, whatever it asked for."""


def _key(key: str) -> str:
    kind, _, name = key.partition(":")
    return f"{kind}.{_encoded(name)}"


def _encoded(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=") or "_"


class NATSRecords:
    """`RecordStore` in the bucket `<prefix>-records`."""

    def __init__(self, connection: NATSConnection, names: Names, settings: NATSSettings) -> None:
        self._connection = connection
        self.bucket = f"{names.prefix}-records"
        self._settings = settings
        self._kv: KeyValue | None = None

    async def provision(self) -> list[str]:
        """Make the bucket if it is missing; the line that says so, or nothing."""
        js = await self._connection.jetstream()
        try:
            async with translated("look up the records bucket"):
                self._kv = await js.key_value(self.bucket)
            return []
        except jx.BucketNotFoundError:
            pass
        await self._create()
        return [f"created key-value bucket `{self.bucket}` (worker heartbeats and job records)"]

    async def _create(self) -> KeyValue:
        js = await self._connection.jetstream()
        config = KeyValueConfig(
            bucket=self.bucket,
            description="rainier-queue: worker heartbeats, succeeded records and results",
            history=1,
            ttl=KEPT_AT_MOST.total_seconds(),
            storage=StorageType.MEMORY if self._settings.storage == "memory" else StorageType.FILE,
            replicas=self._settings.replicas,
        )
        async with translated("create the records bucket"):
            self._kv = await js.create_key_value(config)
        return self._kv

    async def _bucket(self) -> KeyValue:
        if self._kv is not None:
            return self._kv
        js = await self._connection.jetstream()
        try:
            async with translated("open the records bucket"):
                self._kv = await js.key_value(self.bucket)
        except jx.BucketNotFoundError:
            return await self._create()
        return self._kv

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        until = int((time.time() + ttl.total_seconds()) * 1000)
        kv = await self._bucket()
        async with translated("write a record"):
            await kv.put(_key(key), f"{until}\n".encode() + value)

    async def get_record(self, key: str) -> bytes | None:
        kv = await self._bucket()
        try:
            async with translated("read a record"):
                entry = await kv.get(_key(key))
        except jx.KeyNotFoundError:
            return None
        return _live(entry.value)

    async def forget_record(self, key: str) -> bool:
        was = await self.get_record(key)
        kv = await self._bucket()
        async with translated("delete a record"):
            await kv.purge(_key(key))
        return was is not None

    async def records(self, prefix: str) -> list[bytes]:
        kind, _, start = prefix.partition(":")
        kv = await self._bucket()
        latest: dict[str, bytes | None] = {}
        async with translated("list records"):
            # A watch on one subject filter: the keys of one kind only (a server before
            # 2.10 takes a single filter, which is all this needs).
            watcher = await kv.watch(f"{kind}.>", ignore_deletes=True)
            try:
                async for entry in watcher:
                    if entry is None:
                        break  # the values there were when the watch began: all read
                    if not start or _decoded(entry.key).startswith(start):
                        # A key written again while the watch delivers comes twice: the
                        # later revision wins, so each record is listed once.
                        latest[entry.key] = _live(entry.value)
            finally:
                await watcher.stop()  # type: ignore[no-untyped-call]
        return [body for body in latest.values() if body is not None]


def _decoded(name: str) -> str:
    encoded = name.partition(".")[2]
    if encoded == "_":
        return ""
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()


def _live(value: bytes | None) -> bytes | None:
    """The record's body, or None when it expired (or is not one of ours)."""
    if not value:
        return None
    head, sep, body = value.partition(b"\n")
    if not sep or not head.isdigit():
        return None
    return body if int(head) > time.time() * 1000 else None


__all__ = ["KEPT_AT_MOST", "NATSRecords"]
