# SPDX-License-Identifier: MIT
"""The Redis driver's failed store: a list per queue, newest first.

A failed record is `{"job": <envelope>, "error": ..., "failed_at": ...}`
as JSON, pushed onto the queue's own failed list by the same script that
removes the job from its stream, so the two never disagree. The set of
queues that ever had a failed job is kept namespace-wide, for listing and
flushing across every queue. A job with an ordering key that fails lets its
key go in the same script, and one retried joins the end of its key's line
(`ordered_scripts.py`). Retrying removes the exact record and appends
the restored job to the stream in one script, so a retry cannot run twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import cast

from ..._clock import from_micros, utcnow
from ...envelope import QueuedJob, format_time
from ...envelope.fields import parse_json, raw_value, time_field
from ...envelope.reading import Malformed
from ...errors import MalformedEntry
from ...queue import FailedJob
from . import ordered_scripts, scripts
from .connection import Calls, translated
from .keys import GROUP, Keys, QueueKeys
from .ordering import LET_GO, ordering_key
from .wakeups import wake_apart

log = logging.getLogger("rainier_queue.redis")


class RedisFailedStore:
    """`FailedJobStore` for `RedisQueue`: a part of the queue, on the queue's client and keys."""

    def __init__(self, calls: Calls, keys: Keys) -> None:
        self._calls = calls
        self._ready = calls.ready
        self.keys = keys

    async def record(
        self, keys: QueueKeys, job: QueuedJob, entry_id: str, token: str, error: str
    ) -> bool:
        """Move a delivered entry from its stream to the failed list, with `error`.

        False (nothing moved) if `token` is no longer the entry's: the
        reservation that fails it is stale.
        """
        # ASCII escapes throughout: whatever text the job or the error holds, the
        # record can be written (a lone surrogate in UTF-8 cannot).
        record = json.dumps(
            {"job": job.to_dict(), "error": error, "failed_at": format_time(utcnow())},
            separators=(",", ":"),
        )
        async with translated("record a failed job"):
            await (await self._ready()).sadd(self.keys.failed_queues, job.queue)
        named = [keys.stream, keys.leases, keys.deliveries, keys.failed]
        key = ordering_key(job)
        if key is None:
            ok = await self._calls.run(
                scripts.FAIL, named, [GROUP, entry_id, token, record], f"fail job {job.id}"
            )
            return bool(ok)
        # A failed job lets its ordering key go: the next of the key leaves the line.
        ok = await self._calls.run(
            ordered_scripts.FAIL,
            [*named, keys.delayed, keys.heads, keys.line, keys.held],
            [GROUP, entry_id, token, record, key, job.id],
            f"fail job {job.id}",
        )
        if ok == LET_GO:
            await wake_apart(await self._ready(), self.keys.wake, 1)
        return bool(ok)

    async def _failed_queues(self, queue: str | None) -> list[str]:
        if queue is not None:
            return [queue]
        async with translated("list failed queues"):
            names = await cast(
                Awaitable[set[str]], (await self._ready()).smembers(self.keys.failed_queues)
            )
        return sorted(names)

    async def _failed_records(self, queue: str) -> list[tuple[str, FailedJob]]:
        async with translated("list failed jobs"):
            raw = await cast(
                Awaitable[list[str]],
                (await self._ready()).lrange(self.keys.queue(queue).failed, 0, -1),
            )
        return [(item, _failed_record(item, queue, i)) for i, item in enumerate(raw)]

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        rows: list[FailedJob] = []
        for name in await self._failed_queues(queue):
            rows += [failed for _, failed in await self._failed_records(name)]
        rows.sort(key=lambda f: f.failed_at, reverse=True)
        return rows[:limit]

    async def _find_failed(self, job_id: str) -> tuple[str, str, FailedJob] | None:
        for name in await self._failed_queues(None):
            for raw, failed in await self._failed_records(name):
                if failed.job.id == job_id:
                    return name, raw, failed
        return None

    async def find(self, job_id: str) -> FailedJob | None:
        """The failed record of job `job_id`, or None (a read of every failed list)."""
        found = await self._find_failed(job_id)
        return None if found is None else found[2]

    async def retry_failed(self, job_id: str) -> bool:
        found = await self._find_failed(job_id)
        if found is None:
            return False
        name, raw, failed = found
        # Not its uniqueness key: that lock was given back when the job failed.
        restored = failed.job.with_changes(attempts=0, available_at=utcnow(), unique_key=None)
        keys = self.keys.queue(name)
        key = ordering_key(restored)
        if key is None:
            ok = await self._calls.run(
                scripts.RESTORE_FAILED,
                [keys.failed, keys.stream],
                [raw, restored.to_json()],
                "retry",
            )
        else:  # it joins the end of its key's line
            ok = await self._calls.run(
                ordered_scripts.RESTORE_FAILED,
                [keys.failed, keys.stream, keys.delayed, *keys.ordered_keys],
                [raw, restored.to_json(), key, restored.id],
                "retry",
            )
        if ok:
            await wake_apart(await self._ready(), self.keys.wake, 1)
        return bool(ok)

    async def forget_failed(self, job_id: str) -> bool:
        found = await self._find_failed(job_id)
        if found is None:
            return False
        async with translated("forget a failed job"):
            removed = await (await self._ready()).lrem(
                self.keys.queue(found[0]).failed, 1, found[1]
            )
        return bool(removed)

    async def flush_failed(self, *, queue: str | None = None) -> int:
        total = 0
        for name in await self._failed_queues(queue):
            failed_key = self.keys.queue(name).failed
            async with translated("flush failed jobs"):
                pipe = (await self._ready()).pipeline(transaction=False)
                pipe.llen(failed_key)
                pipe.delete(failed_key)
                count, _ = await pipe.execute()
            total += int(count)
        return total


def _failed_record(item: str, queue: str, index: int) -> FailedJob:
    """One record of a failed list, whatever it holds: unreadable ones are listed, not skipped."""
    try:
        data = parse_json(item, "failed record")
        if not isinstance(data, dict):
            raise MalformedEntry("", "is not a JSON object", what="failed record")
        return FailedJob(
            job=QueuedJob.from_dict(data.get("job")),
            error=str(data.get("error", "")),
            failed_at=time_field(data.get("failed_at"), "failed_at"),
        )
    except MalformedEntry as exc:
        reason = exc.reason
    except Exception as exc:  # listing must never stop at one record
        reason = f"could not be read ({type(exc).__name__}: {exc})"
    log.warning("queue %r: failed record %d cannot be read (%s)", queue, index, reason)
    unreadable = Malformed(reason=reason, raw=raw_value(item), queue=queue)
    return FailedJob(
        job=unreadable.as_job(queue=queue, job_id=f"unreadable-{queue}-{index}"),
        error=f"this failed record cannot be read: {reason}",
        failed_at=from_micros(0),
    )


__all__ = ["RedisFailedStore"]
