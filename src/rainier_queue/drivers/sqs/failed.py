# SPDX-License-Identifier: MIT
"""The failed store: one failed queue per connection, holding each failed job with its error.

The upstream driver only logged a failed job and deleted it, which lost the
error and the job. Here `fail` sends a record (the job's envelope, which names
its queue, the error and when it failed, as JSON) to the failed queue, and only once SQS
has taken it is the job deleted from its work queue: a crash between the
two leaves it twice, never nowhere.

SQS cannot look a message up or list a queue without receiving it, so
listing, retrying, forgetting and flushing receive the failed queue's
records (hiding them for a short while), do what was asked with the one
wanted, and make the rest visible again at once. That suits a failed store
that someone looks after by hand; it costs a receive per ten records.
SQS's short polls sample its servers, so on real SQS a listing may miss a
record now and then (moto holds every message in one place).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...envelope.reading import Malformed
from ...errors import BrokerRejected
from ...queue import FailedJob, new_token
from .connection import SQSConnection
from .messages import fifo_id
from .provisioning import Queues

LOOK = 30
"""Seconds a listing hides the records it reads before making them visible again."""


@dataclass(frozen=True, slots=True)
class _Record:
    url: str
    receipt: str
    failed: FailedJob | None


class FailedStore:
    """`FailedJobStore` on the failed queues."""

    def __init__(
        self,
        connection: SQSConnection,
        queues: Queues,
        push: Callable[[QueuedJob], Awaitable[str]],
    ) -> None:
        self._connection = connection
        self._queues = queues
        self._push = push

    async def record(self, job: QueuedJob, error: str) -> None:
        """Keep `job` as failed with `error`, in its queue's failed queue."""
        body = {"job": job.to_dict(), "error": error, "failed_at": utcnow().isoformat()}
        args: dict[str, Any] = {
            "QueueUrl": await self._queues.failed_url(job.queue),
            "MessageBody": json.dumps(body, separators=(",", ":"), ensure_ascii=True),
        }
        if self._queues.names.fifo:
            args["MessageGroupId"] = fifo_id(job.id)
            args["MessageDeduplicationId"] = fifo_id(f"failed-{job.id}-{new_token()}")
        await self._connection.call(
            "send_message", f"record failed job {job.id}", write=True, **args
        )

    async def record_malformed(self, malformed: Malformed, *, queue: str, source: str) -> None:
        job = malformed.as_job(queue=queue, job_id=f"not-a-job-{source}")
        await self.record(job, malformed.error)

    async def _scan(self, url: str) -> list[_Record]:
        """Every record of one failed queue, each hidden for `LOOK` seconds."""
        found: list[_Record] = []
        while True:
            answer = await self._connection.call(
                "receive_message",
                "read the failed jobs",
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=LOOK,
                WaitTimeSeconds=0,
            )
            messages = answer.get("Messages", [])
            if not messages:
                return found
            found += [_Record(url, m["ReceiptHandle"], _read(m.get("Body"))) for m in messages]

    async def _put_back(self, records: Sequence[_Record]) -> None:
        """Make records a scan hid visible again (best effort: else they show in `LOOK` s)."""
        for url in {r.url for r in records}:
            mine = [r for r in records if r.url == url]
            for start in range(0, len(mine), 10):
                entries = [
                    {"Id": str(i), "ReceiptHandle": r.receipt, "VisibilityTimeout": 0}
                    for i, r in enumerate(mine[start : start + 10])
                ]
                try:
                    await self._connection.call(
                        "change_message_visibility_batch",
                        "show the failed jobs again",
                        QueueUrl=url,
                        Entries=entries,
                    )
                except Exception:
                    continue

    async def _delete(self, records: Sequence[_Record]) -> None:
        for url in {r.url for r in records}:
            mine = [r for r in records if r.url == url]
            for start in range(0, len(mine), 10):
                entries = [
                    {"Id": str(i), "ReceiptHandle": r.receipt}
                    for i, r in enumerate(mine[start : start + 10])
                ]
                await self._connection.call(
                    "delete_message_batch",
                    "delete failed jobs",
                    QueueUrl=url,
                    Entries=entries,
                )

    async def _all(self) -> list[_Record]:
        try:
            url = await self._queues.failed_url("")
        except BrokerRejected as exc:
            if getattr(exc, "queue", None) == "":
                return []  # never provisioned: nothing has failed here
            raise
        return await self._scan(url)

    async def listing(self, queue: str | None, limit: int) -> list[FailedJob]:
        records = await self._all()
        await self._put_back(records)
        found = [
            r.failed
            for r in records
            if r.failed is not None and (queue is None or r.failed.job.queue == queue)
        ]
        found.sort(key=lambda f: f.failed_at, reverse=True)
        return found[:limit]

    async def _take(self, job_id: str) -> tuple[list[_Record], list[_Record]]:
        records = await self._all()
        wanted = [r for r in records if r.failed is not None and r.failed.job.id == job_id]
        rest = [r for r in records if r not in wanted]
        return wanted, rest

    async def retry(self, job_id: str) -> bool:
        wanted, rest = await self._take(job_id)
        try:
            if not wanted:
                return False
            newest = max(wanted, key=lambda r: r.failed.failed_at if r.failed else utcnow())
            assert newest.failed is not None
            job = newest.failed.job
            await self._push(job.with_changes(attempts=0, unique_key=None, available_at=utcnow()))
            await self._delete(wanted)
            return True
        finally:
            await self._put_back(rest)

    async def forget(self, job_id: str) -> bool:
        wanted, rest = await self._take(job_id)
        try:
            await self._delete(wanted)
            return bool(wanted)
        finally:
            await self._put_back(rest)

    async def flush(self, queue: str | None) -> int:
        records = await self._all()
        wanted = [r for r in records if queue is None or (r.failed and r.failed.job.queue == queue)]
        rest = [r for r in records if r not in wanted]
        try:
            await self._delete(wanted)
        finally:
            await self._put_back(rest)
        return len(wanted)


def _read(body: object) -> FailedJob | None:
    """A failed record as written by `record`; None for anything else in the failed queue."""
    try:
        data = json.loads(str(body))
        return FailedJob(
            job=QueuedJob.from_dict(data["job"]),
            error=str(data["error"]),
            failed_at=datetime.fromisoformat(str(data["failed_at"])),
        )
    except Exception:
        return None


__all__ = ["FailedStore"]
