# SPDX-License-Identifier: MIT
"""The failed store: a stream of its own, one subject per failed job, kept until told.

A failed job is published to `<prefix>.failed.<queue token>.<job token>`
on the stream `<prefix>-failed` (limits retention, so nothing takes it away
but a retry, a forget or a flush), as JSON: the job's envelope, the error
and when it failed. It is written, and acknowledged by the server, before
the job leaves the work stream (`term`, or a delete for a message the
server stopped delivering), so a crash between the two leaves the job
twice, never nowhere; its `Nats-Msg-Id` (the job and its message's
sequence) makes a repeat within the duplicate window a no-op.

Looking a job up by id is one read of the last message on
`<prefix>.failed.*.<job token>`; listing walks the subjects in order, one
read per failed job, which suits a failed store that someone looks after.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime

import nats.js.errors as jx
from nats.js.api import RawStreamMsg

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...envelope.reading import Malformed
from ...queue import FailedJob
from .connection import NATSConnection, translated
from .names import Names


class FailedStore:
    """`FailedJobStore` on the failed stream."""

    def __init__(
        self,
        connection: NATSConnection,
        names: Names,
        push: Callable[[QueuedJob], Awaitable[str]],
    ) -> None:
        self._connection = connection
        self._names = names
        self._push = push

    async def record(self, job: QueuedJob, error: str, *, source: str) -> None:
        """Keep `job` as failed with `error`; `source` names the message it came from."""
        body = {"job": job.to_dict(), "error": error, "failed_at": utcnow().isoformat()}
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=True)
        await self._connection.publish(
            self._names.failed(job.queue, job.id),
            text.encode(),
            {
                "Nats-Msg-Id": f"failed:{source}",
                "Rq-Job": job.id.encode("ascii", "replace").decode(),
            },
        )

    async def record_malformed(self, malformed: Malformed, *, queue: str, source: str) -> None:
        job = malformed.as_job(queue=queue, job_id=f"not-a-job-{source}")
        await self.record(job, malformed.error, source=source)

    async def _last(self, job_id: str) -> RawStreamMsg | None:
        js = await self._connection.jetstream()
        try:
            async with translated(f"look up failed job {job_id!r}"):
                return await js.get_last_msg(
                    self._names.failed_stream, self._names.failed_of_job(job_id)
                )
        except jx.NotFoundError:
            return None

    async def listing(self, queue: str | None, limit: int) -> list[FailedJob]:
        js = await self._connection.jetstream()
        subject = self._names.failed_of_queue(queue)
        found: list[FailedJob] = []
        seq = 1
        while True:
            try:
                async with translated("list failed jobs"):
                    msg = await js.get_msg(
                        self._names.failed_stream, seq, subject=subject, next=True
                    )
            except jx.NotFoundError:
                break
            failed = _read(msg)
            if failed is not None:
                found.append(failed)
            seq = (msg.seq or seq) + 1
        found.reverse()
        return found[:limit]

    async def retry(self, job_id: str) -> bool:
        msg = await self._last(job_id)
        failed = None if msg is None else _read(msg)
        if failed is None:
            return False
        await self._push(
            failed.job.with_changes(attempts=0, unique_key=None, available_at=utcnow())
        )
        await self._connection.purge(self._names.failed_stream, self._names.failed_of_job(job_id))
        return True

    async def forget(self, job_id: str) -> bool:
        stream, subject = self._names.failed_stream, self._names.failed_of_job(job_id)
        return await self._connection.purge(stream, subject) > 0

    async def flush(self, queue: str | None) -> int:
        stream = self._names.failed_stream
        return await self._connection.purge(stream, self._names.failed_of_queue(queue))


def _read(msg: RawStreamMsg) -> FailedJob | None:
    """A failed record as written by `record`; None for anything else on the subject."""
    try:
        data = json.loads(msg.data or b"")
        return FailedJob(
            job=QueuedJob.from_dict(data["job"]),
            error=str(data["error"]),
            failed_at=datetime.fromisoformat(str(data["failed_at"])),
        )
    except Exception:
        return None


__all__ = ["FailedStore"]
