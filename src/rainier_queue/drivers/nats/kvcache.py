# SPDX-License-Identifier: MIT
"""A lock store (`Cache`) over a JetStream key-value bucket, so NATS can count batches.

Why: batches on a broker are counted by `CacheBatches` (`cached_batches.py`)
in a store with set-if-absent and compare-and-set, and NATS has one beside
its streams: a key-value bucket, whose `create` writes only a key that is
not there and whose `update` with the revision last read writes only if
nobody wrote since. So NATS needs no second server (Kafka asks for a
`locks=` store) to keep batches: the bucket `<prefix>-batches` is theirs.

What it costs: a compare-and-set is a read and a conditional write, two
round trips; one that lost a race to a writer that wrote back the same
bytes reads again and retries, so it fails only when the value differs.
A 2.9 server has no time to live per entry, so, as in `records.py`, each
value carries its own expiry (milliseconds since the epoch, 0 for none) and
a read treats an expired value as absent; the bucket's `max_age` bounds
every entry's life besides. Keys are the caller's, in URL-safe base64
(a bucket key may hold only letters, digits and `-/_=.`).
"""

from __future__ import annotations

import base64
import time
from datetime import timedelta

import nats.js.errors as jx
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from ...locks import Cache, parse_counter
from .connection import NATSConnection, translated
from .settings import NATSSettings

_WRONG_LAST = (10071, 10164)
"""JetStream's error codes for a write whose expected last revision was not the last."""


def _key(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=") or "_"


def _stamped(value: bytes, ttl: timedelta | None) -> bytes:
    until = 0 if ttl is None else int((time.time() + ttl.total_seconds()) * 1000)
    return f"{until}\n".encode() + value


def _body(value: bytes | None) -> bytes | None:
    """The value without its expiry, or None when it expired (or is not one of ours)."""
    if value is None:
        return None
    head, sep, body = value.partition(b"\n")
    if not sep or not head.isdigit():
        return None
    until = int(head)
    return body if until == 0 or until > time.time() * 1000 else None


class KeyValueCache(Cache):
    """`Cache` in one key-value bucket of a NATS connection, made on first use."""

    name = "nats"

    def __init__(
        self, connection: NATSConnection, settings: NATSSettings, bucket: str, kept: timedelta
    ) -> None:
        self._connection = connection
        self._settings = settings
        self.bucket = bucket
        self._kept = kept
        """The bucket's `max_age`: no entry outlives it, whatever its own expiry."""
        self._kv: KeyValue | None = None

    @property
    def is_shared(self) -> bool:
        return True

    async def provision(self) -> list[str]:
        """Make the bucket if it is missing; the line that says so, or nothing."""
        if self._kv is not None:
            return []
        js = await self._connection.jetstream()
        try:
            async with translated(f"look up the bucket {self.bucket!r}"):
                self._kv = await js.key_value(self.bucket)
            return []
        except jx.BucketNotFoundError:
            pass
        await self._create()
        return [f"created key-value bucket `{self.bucket}` (batches)"]

    async def _create(self) -> KeyValue:
        js = await self._connection.jetstream()
        config = KeyValueConfig(
            bucket=self.bucket,
            description="rainier-queue: batches (counts, callbacks, done-markers)",
            history=1,
            ttl=self._kept.total_seconds(),
            storage=StorageType.MEMORY if self._settings.lossy else StorageType.FILE,
            replicas=self._settings.replicas,
        )
        async with translated(f"create the bucket {self.bucket!r}"):
            self._kv = await js.create_key_value(config)
        return self._kv

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            await self.provision()
        assert self._kv is not None
        return self._kv

    async def _read(self, key: str) -> tuple[bytes | None, int]:
        """The value at `key` as stored, expiry and all (None if absent), and the revision
        to write after: 0 for a key never written, a delete marker's own after a delete."""
        kv = await self._bucket()
        try:
            async with translated("read a key"):
                entry = await kv.get(_key(key))
        except jx.KeyNotFoundError as gone:  # nats-py says so of a deleted key too
            marker = getattr(gone, "entry", None)
            return None, (marker.revision or 0) if marker is not None else 0
        except jx.NotFoundError:
            return None, 0
        return entry.value, entry.revision or 0

    async def _write_after(self, key: str, revision: int, stamped: bytes) -> bool:
        """Write `stamped` only if `revision` is still the key's last; False if it is not."""
        kv = await self._bucket()
        async with translated("write a key"):  # which would make a lost race a refusal
            try:
                await kv.update(_key(key), stamped, last=revision)
            except jx.KeyWrongLastSequenceError:
                return False
        return True

    async def get(self, key: str) -> bytes | None:
        return _body((await self._read(key))[0])

    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        kv = await self._bucket()
        async with translated("write a key"):
            await kv.put(_key(key), _stamped(value, ttl))

    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        while True:
            raw, revision = await self._read(key)
            if _body(raw) is not None:
                return False
            if await self._write_after(key, revision, _stamped(value, ttl)):
                return True
            # Written since the read: by an add that won (read again to see it), or an
            # expired value rewritten.

    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        while True:
            raw, revision = await self._read(key)
            if _body(raw) != expected:
                return False
            if await self._write_after(key, revision, _stamped(value, ttl)):
                return True

    async def forget(self, key: str) -> bool:
        raw, _ = await self._read(key)
        kv = await self._bucket()
        async with translated("delete a key"):
            await kv.purge(_key(key))
        return _body(raw) is not None

    async def forget_if(self, key: str, expected: bytes) -> bool:
        while True:
            raw, revision = await self._read(key)
            if _body(raw) != expected:
                return False
            kv = await self._bucket()
            async with translated("delete a key"):
                try:
                    await kv.delete(_key(key), last=revision)
                except jx.APIError as lost:  # a delete's lost race is not translated for us
                    if lost.err_code in _WRONG_LAST:
                        continue
                    raise
            return True

    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        while True:
            raw, revision = await self._read(key)
            have = _body(raw)
            if have is None:
                new = by
                stamped = _stamped(str(new).encode(), ttl)
            else:  # the counter keeps its expiry: the stored head, as it is
                new = parse_counter(key, have) + by
                assert raw is not None
                stamped = raw.partition(b"\n")[0] + b"\n" + str(new).encode()
            if await self._write_after(key, revision, stamped):
                return new

    async def flush(self) -> None:
        await self._bucket()
        async with translated(f"empty the bucket {self.bucket!r}"):
            js = await self._connection.jetstream()
            await js.purge_stream(f"KV_{self.bucket}")


__all__ = ["KeyValueCache"]
