# SPDX-License-Identifier: MIT
"""The Redis driver's failed store: a list per queue, newest first.

A failed record is `{"job": <envelope>, "error": ..., "failed_at": ...}`
as JSON, pushed onto the queue's own failed list by the same script that
removes the job from its stream, so the two never disagree. The set of
queues that ever had a failed job is kept namespace-wide, for listing and
flushing across every queue. Retrying removes the exact record and appends
the restored job to the stream in one script, so a retry cannot run twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Sequence
from typing import Any, cast

from ..._clock import utcnow
from ...envelope import QueuedJob, parse_time
from ...errors import PayloadError
from ...queue import FailedJob
from . import scripts
from .connection import Ready, translated
from .keys import Keys

log = logging.getLogger("rainier_queue.redis")


class RedisFailedJobs:
    """`FailedJobStore` for `RedisQueue` (a mixin: it uses the queue's client and keys)."""

    keys: Keys
    _ready: Ready

    async def _run(self, source: str, keys: Sequence[str], args: Sequence[Any], what: str) -> Any:
        raise NotImplementedError

    def _wake(self, pipe: Any, tokens: int) -> None:
        raise NotImplementedError

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
        out: list[tuple[str, FailedJob]] = []
        for item in raw:
            try:
                data = json.loads(item)
                failed = FailedJob(
                    job=QueuedJob.from_dict(data["job"]),
                    error=str(data.get("error", "")),
                    failed_at=parse_time(data["failed_at"]),
                )
            except (ValueError, KeyError, TypeError, PayloadError):
                log.warning("queue %r: skipping an unreadable failed-job record", queue)
                continue
            out.append((item, failed))
        return out

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

    async def retry_failed(self, job_id: str) -> bool:
        found = await self._find_failed(job_id)
        if found is None:
            return False
        name, raw, failed = found
        # Not its uniqueness key: that lock was given back when the job failed.
        restored = failed.job.with_changes(attempts=0, available_at=utcnow(), unique_key=None)
        keys = self.keys.queue(name)
        ok = await self._run(
            scripts.RESTORE_FAILED, [keys.failed, keys.stream], [raw, restored.to_json()], "retry"
        )
        if ok:
            pipe = (await self._ready()).pipeline(transaction=False)
            self._wake(pipe, 1)
            async with translated("wake workers"):
                await pipe.execute()
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


__all__ = ["RedisFailedJobs"]
