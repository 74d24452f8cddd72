# SPDX-License-Identifier: MIT
"""Finding a job by id, and the record store, on Redis.

Why a part of its own, and why a scan: a stream entry is found by its entry
id, not by the job's, and keeping an index from one to the other would cost
every push, promotion, acknowledgement and failure a write more, for a
question an operator asks now and then. So `find_job` reads the queues
instead: each stream (in pages), each delayed set, the jobs held behind
their ordering keys (`ordering.py`), then the failed lists.
Its cost grows with the jobs waiting (about a millisecond per thousand on
a local server); pushes and settles pay nothing for it.

Records (heartbeats, succeeded records, results, cancellation marks) are
plain keys with a time to live under the hash tag `{_records}`: Redis
expires them itself, and on a cluster they share one slot. Each kind of
record (the part of its key before the first `:`) also has a sorted set
naming its keys by when they expire, which every write trims, so listing a
kind (workers, or the cancellations a worker checks every second) reads
that set and never scans the keyspace.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, cast

from ..._clock import from_micros, utcnow
from ...envelope import QueuedJob
from ...envelope.reading import Malformed, read_envelope
from ...jobstate import Found
from .connection import Calls, translated
from .failed import RedisFailedStore
from .keys import GROUP, Keys, QueueKeys
from .ordering import ordering_key, read_held

PAGE = 500
"""Stream entries read per round trip while looking for a job."""


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


class RedisLookup:
    """`JobLookup` and `RecordStore` for `RedisQueue`, on the queue's client and keys."""

    def __init__(self, calls: Calls, keys: Keys, failed: RedisFailedStore, lease: timedelta):
        self._ready = calls.ready
        self._keys = keys
        self._failed = failed
        self._lease = lease

    # -- JobLookup ---------------------------------------------------------------

    async def find_job(self, job_id: str) -> Found | None:
        needle = json.dumps(job_id)
        for queue in await self._queues():
            keys = self._keys.queue(queue)
            found = await self._in_stream(keys, queue, job_id, needle)
            if found is None:
                found = await self._in_delayed(keys, queue, job_id, needle)
            if found is None:
                found = await self._in_line(keys, queue, job_id, needle)
            if found is not None:
                return found
        failed = await self._failed.find(job_id)
        if failed is None:
            return None
        return Found(job=failed.job, where="failed", error=failed.error, failed_at=failed.failed_at)

    async def _queues(self) -> list[str]:
        """Every queue with a stream or a delayed set in this namespace (on a cluster, on
        every primary): a queue whose only jobs were dispatched with a delay has no stream."""
        client = await self._ready()
        names: set[str] = set()
        start = len(self._keys.prefix) + 1
        for suffix in ("}:stream", "}:delayed"):
            pattern = _glob_escape(self._keys.prefix) + "{*" + suffix
            async with translated("list queues"):
                found = {str(key) async for key in client.scan_iter(match=pattern, count=1000)}
            names.update(Keys.decode_queue(key[start : -len(suffix)]) for key in found)
        return sorted(names)

    async def _in_stream(
        self, keys: QueueKeys, queue: str, job_id: str, needle: str
    ) -> Found | None:
        client = await self._ready()
        low = "-"
        while True:
            async with translated("read a stream"):
                page = cast(
                    list[tuple[str, dict[str, str]]],
                    await client.xrange(keys.stream, min=low, max="+", count=PAGE),
                )
            for entry_id, fields in page:
                body = fields.get("body")
                if not isinstance(body, str) or needle not in body:
                    continue
                job = _job(body, queue, job_id)
                if job is None:
                    continue
                return await self._reserved_or_queued(keys, str(entry_id), job)
            if len(page) < PAGE:
                return None
            low = "(" + str(page[-1][0])

    async def _reserved_or_queued(self, keys: QueueKeys, entry_id: str, job: QueuedJob) -> Found:
        client = await self._ready()
        async with translated("read a job's delivery"):
            token = await cast(Awaitable[Any], client.hget(keys.leases, entry_id))
            delivered = await cast(Awaitable[Any], client.hget(keys.deliveries, entry_id))
        job = job.with_changes(attempts=job.attempts + int(delivered or 0))
        if token is None:
            return Found(job=job, where="queued")
        async with translated("read a job's lease"):
            pending = await client.xpending_range(
                keys.stream, GROUP, min=entry_id, max=entry_id, count=1
            )
        idle = timedelta(milliseconds=int(pending[0]["time_since_delivered"])) if pending else None
        until = None if idle is None else utcnow() - idle + self._lease
        return Found(job=job, where="reserved", lease_until=until)

    async def _in_delayed(
        self, keys: QueueKeys, queue: str, job_id: str, needle: str
    ) -> Found | None:
        client = await self._ready()
        async with translated("read a delayed set"):
            members = cast(
                list[tuple[str, float]],
                await client.zrange(keys.delayed, 0, -1, withscores=True),
            )
        for body, score in members:
            if needle not in body:
                continue
            job = _job(body, queue, job_id)
            if job is not None:
                due = from_micros(int(score) * 1000)
                if due <= utcnow():
                    return Found(job=job, where="queued")
                return Found(job=job, where="delayed", due_at=due)
        return None

    async def _in_line(self, keys: QueueKeys, queue: str, job_id: str, needle: str) -> Found | None:
        """A job held behind an earlier one of its ordering key: waiting (`ordering.py`)."""
        client = await self._ready()
        async with translated("read the jobs held behind their ordering keys"):
            async for _, value in client.hscan_iter(keys.held, count=PAGE):
                if needle not in value:
                    continue
                held = read_held(str(value))
                job = None if held is None else _job(held.body, queue, job_id)
                if job is not None:
                    return Found(job=job, where="queued")
        return None

    # -- OrderingLookup ----------------------------------------------------------

    async def ahead_of(self, job_id: str) -> str | None:
        """The job holding the ordering key of `job_id`, if that is another job: the one of
        its key out of the line (waiting, delayed or running), which it waits for."""
        found = await self.find_job(job_id)
        if found is None or found.where == "failed":
            return None
        key = ordering_key(found.job)
        if key is None:
            return None
        client = await self._ready()
        async with translated("read which job holds an ordering key"):
            head = await cast(
                Awaitable[Any], client.hget(self._keys.queue(found.job.queue).heads, key)
            )
        return None if head is None or str(head) == job_id else str(head)

    # -- RecordStore -------------------------------------------------------------

    def _record(self, key: str) -> str:
        return f"{self._keys.prefix}{{_records}}:{key}"

    def _index(self, key: str) -> str:
        """The sorted set naming every record of `key`'s kind (`worker:`, `cancel:`, ...), each
        scored by when it expires: what `records` reads instead of scanning the keyspace."""
        kind = key.partition(":")[0]
        return f"{self._keys.prefix}{{_records}}#{kind}"

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        client = await self._ready()
        ms = max(1, int(ttl / _MS))
        name = self._record(key)
        async with translated("write a record"):
            pipe = client.pipeline(transaction=False)  # one slot: the hash tag `{_records}`
            now = _now_ms()
            pipe.set(name, value.decode(), px=ms)
            pipe.zadd(self._index(key), {name: now + ms})
            pipe.zremrangebyscore(self._index(key), "-inf", now)  # the index never outgrows
            await pipe.execute()

    async def get_record(self, key: str) -> bytes | None:
        client = await self._ready()
        async with translated("read a record"):
            value = await client.get(self._record(key))
        return None if value is None else str(value).encode()

    async def forget_record(self, key: str) -> bool:
        client = await self._ready()
        name = self._record(key)
        async with translated("delete a record"):
            pipe = client.pipeline(transaction=False)
            pipe.delete(name)
            pipe.zrem(self._index(key), name)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def records(self, prefix: str) -> list[bytes]:
        """The records whose keys start with `prefix` (which names their kind, `cancel:`), read
        through the kind's index: a cost in the records of that kind, not in the keyspace,
        so a worker's check for cancellations each second stays cheap on a large database."""
        client = await self._ready()
        index, start = self._index(prefix), self._record(prefix)
        async with translated("list records"):
            pipe = client.pipeline(transaction=False)
            pipe.zremrangebyscore(index, "-inf", _now_ms())  # expired: Redis dropped the key
            pipe.zrange(index, 0, -1)
            _, members = await pipe.execute()
            names = [str(m) for m in members if str(m).startswith(start)]
            values = await client.mget(names) if names else []
        # A key may expire between the index's read and the values'.
        return [str(value).encode() for value in values if value is not None]


def _now_ms() -> int:
    return int(utcnow().timestamp() * 1000)


_MS = timedelta(milliseconds=1)


def _job(body: str, queue: str, job_id: str) -> QueuedJob | None:
    job = read_envelope(body, queue=queue)
    if isinstance(job, Malformed):
        return None
    return job if job.id == job_id else None


__all__ = ["RedisLookup"]
