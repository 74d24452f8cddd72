# SPDX-License-Identifier: MIT
"""What a job is doing and which workers are alive: the port's side of seeing the system.

"Did my job run?" and "what is that worker doing?" are the first questions
of anyone operating a queue, and until now only the driver's own tables
could answer them, each in its own way. So two small abilities join the
port, both optional and both declared in `Capabilities`:

- `JobLookup.find_job(job_id)`: the driver finds one job in its own
  storage (waiting, delayed, reserved, or in the failed store). A log or
  a broker that cannot find a message by id does not have it, and says so
  (`Capabilities.job_lookup` False); asking then gives `unknown` with the
  reason, never a crash.
- `RecordStore`: a few small records with a time to live, kept where the
  connection keeps its jobs (a table, Redis keys, a dict). Workers keep
  their heartbeat there, and a worker writes a job's outcome there when
  someone asked for it (a result, or a succeeded record), which a deleted
  job otherwise leaves nowhere.

The records' layout (keys and JSON) is written once here, so the worker
that writes them and the manager that reads them cannot drift apart.
Nothing here runs per job unless someone asked for a record of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, Self, runtime_checkable

from ._clock import utcnow
from .envelope import QueuedJob, format_time, parse_time

Status = Literal["queued", "delayed", "running", "succeeded", "failed", "cancelled", "unknown"]
"""Where a job is: waiting and due, waiting until a time, held by a worker, done for good
(succeeded, in the failed store, or cancelled), or not found."""

Stored = Literal["queued", "delayed", "reserved", "failed"]
"""Where a driver found a job in its own storage."""

HEARTBEAT_EVERY = timedelta(seconds=10)
"""How often a worker writes its heartbeat: a cadence, not per job."""

GONE_AFTER = timedelta(seconds=60)
"""A worker whose last beat is older than this is shown as gone (six missed beats)."""

GONE_KEPT_FOR = timedelta(hours=1)
"""How long a gone worker's last heartbeat is kept to be shown before it expires."""

KEEP_RECORD_HEADER = "rq-keep-record"
"""An envelope header asking the worker to record the job's success for this many
seconds, whatever the worker's own setting (the scheduler sets it, to find a tick's job
by id after it ran)."""

WORKER_KEY = "worker:"
JOB_KEY = "job:"
ATTEMPTS_KEY = "attempts:"
CANCEL_KEY = "cancel:"
"""A cancellation asked for and not yet carried out: workers read these on a cadence."""
CANCELLED_KEY = "cancelled:"
"""A job that ended cancelled, for `status`."""

CANCEL_KEPT = timedelta(days=7)
"""How long a cancellation mark waits for its job (a delayed one included) to be reserved."""

CANCELLED_KEPT = timedelta(days=1)
"""How long the record of a cancelled job is kept for `status`."""

ATTEMPTS_KEPT = timedelta(days=7)
"""How long the errors of a job's earlier attempts are kept after its last one."""

ATTEMPTS_LISTED = 20
"""The most recent attempts whose errors are kept; older ones are dropped."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """One job as a driver found it in its own storage."""

    job: QueuedJob
    where: Stored
    due_at: datetime | None = None
    """For `delayed`: when it falls due."""
    lease_until: datetime | None = None
    """For `reserved`: when its lease ends (a lapsed one is reclaimed by the next reserve)."""
    error: str | None = None
    """For `failed`: the failed record's error, traceback included."""
    failed_at: datetime | None = None


@runtime_checkable
class JobLookup(Protocol):
    """A driver that can find one job by id in its own storage (`Capabilities.job_lookup`)."""

    async def find_job(self, job_id: str) -> Found | None:
        """The job as stored, or None when the driver holds no job with that id."""
        ...


@runtime_checkable
class OrderingLookup(Protocol):
    """A driver that can tell which job a waiting job's ordering key holds it behind."""

    async def ahead_of(self, job_id: str) -> str | None:
        """The id of the job that keeps `job_id` waiting on its ordering key (the earliest
        still queued, delayed or running before it, or one of the key that runs), or None."""
        ...


@runtime_checkable
class JobRemover(Protocol):
    """A driver that can take one waiting or delayed job out of its storage by id."""

    async def remove_job(self, job_id: str) -> QueuedJob | None:
        """Delete the job if it waits (due or delayed) and no worker holds it; the job
        removed, or None (no such job, or reserved: a worker holds it)."""
        ...


@runtime_checkable
class RecordStore(Protocol):
    """Small records with a time to live, kept beside the jobs (`Capabilities.records`).

    A handful per worker and one per job someone asked about: not a cache,
    and never on a worker's path for a job nobody asked about.
    """

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        """Set `key`, replacing what it held; it expires after `ttl`."""
        ...

    async def get_record(self, key: str) -> bytes | None:
        """The live value at `key`, or None."""
        ...

    async def forget_record(self, key: str) -> bool:
        """Delete `key`; True if something was there."""
        ...

    async def records(self, prefix: str) -> list[bytes]:
        """Every live value whose key starts with `prefix`, in no particular order."""
        ...


# -- the records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningJob:
    """One job a worker runs, as its heartbeat lists it."""

    job_id: str
    name: str
    queue: str
    attempt: int
    started_at: datetime

    def to_data(self) -> dict[str, Any]:
        return {
            "id": self.job_id,
            "name": self.name,
            "queue": self.queue,
            "attempt": self.attempt,
            "started_at": format_time(self.started_at),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            job_id=str(data["id"]),
            name=str(data["name"]),
            queue=str(data["queue"]),
            attempt=int(data["attempt"]),
            started_at=parse_time(str(data["started_at"])),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerBeat:
    """A worker's heartbeat: who it is, what it serves, what it runs, and what it did."""

    worker_id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    started_at: datetime
    last_beat: datetime
    every: timedelta = HEARTBEAT_EVERY
    running: tuple[RunningJob, ...] = ()
    processed: int = 0
    retried: int = 0
    failed: int = 0
    stopping: bool = False

    def is_gone(self, now: datetime | None = None, *, after: timedelta = GONE_AFTER) -> bool:
        """Whether the worker stopped beating: no beat for `after` (or six of its beats)."""
        limit = max(after, 6 * self.every)
        return (now or utcnow()) - self.last_beat > limit

    def to_json(self) -> bytes:
        data = {
            "id": self.worker_id,
            "host": self.host,
            "pid": self.pid,
            "queues": list(self.queues),
            "concurrency": self.concurrency,
            "started_at": format_time(self.started_at),
            "last_beat": format_time(self.last_beat),
            "every": self.every.total_seconds(),
            "running": [job.to_data() for job in self.running],
            "processed": self.processed,
            "retried": self.retried,
            "failed": self.failed,
            "stopping": self.stopping,
        }
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Self:
        """A heartbeat read back; `ValueError` (or `KeyError`) when it is not one."""
        data = json.loads(raw)
        return cls(
            worker_id=str(data["id"]),
            host=str(data["host"]),
            pid=int(data["pid"]),
            queues=tuple(str(q) for q in data["queues"]),
            concurrency=int(data["concurrency"]),
            started_at=parse_time(str(data["started_at"])),
            last_beat=parse_time(str(data["last_beat"])),
            every=timedelta(seconds=float(data.get("every", HEARTBEAT_EVERY.total_seconds()))),
            running=tuple(RunningJob.from_data(job) for job in data.get("running", ())),
            processed=int(data.get("processed", 0)),
            retried=int(data.get("retried", 0)),
            failed=int(data.get("failed", 0)),
            stopping=bool(data.get("stopping", False)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a worker recorded of a job that succeeded: when, where, and its result."""

    job_id: str
    name: str
    queue: str
    attempt: int
    finished_at: datetime
    worker: str
    has_result: bool = False
    result: Any = None
    """The handler's return value as JSON gave it back (when `has_result`)."""
    result_problem: str | None = None
    """Why the result was not kept (it was not JSON), when the job asked for it."""

    def to_json(self) -> bytes:
        data: dict[str, Any] = {
            "id": self.job_id,
            "name": self.name,
            "queue": self.queue,
            "attempt": self.attempt,
            "finished_at": format_time(self.finished_at),
            "worker": self.worker,
        }
        if self.has_result:
            data["result"] = self.result
        if self.result_problem is not None:
            data["result_problem"] = self.result_problem
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Self:
        data = json.loads(raw)
        return cls(
            job_id=str(data["id"]),
            name=str(data["name"]),
            queue=str(data["queue"]),
            attempt=int(data["attempt"]),
            finished_at=parse_time(str(data["finished_at"])),
            worker=str(data["worker"]),
            has_result="result" in data,
            result=data.get("result"),
            result_problem=data.get("result_problem"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelledJob:
    """The record of a job that ended cancelled: which, when, and how."""

    job_id: str
    name: str | None
    queue: str | None
    at: datetime
    how: str
    """"removed while it waited", "before it ran" or "while it ran"."""
    worker: str | None = None

    def to_json(self) -> bytes:
        data = {
            "id": self.job_id,
            "name": self.name,
            "queue": self.queue,
            "at": format_time(self.at),
            "how": self.how,
            "worker": self.worker,
        }
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Self:
        data = json.loads(raw)
        return cls(
            job_id=str(data["id"]),
            name=data.get("name"),
            queue=data.get("queue"),
            at=parse_time(str(data["at"])),
            how=str(data.get("how", "")),
            worker=data.get("worker"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PastAttempt:
    """One attempt that did not succeed: which, when, where, and its error's account."""

    number: int
    error: str
    at: datetime
    worker: str

    def to_data(self) -> dict[str, Any]:
        return {
            "attempt": self.number,
            "error": self.error,
            "at": format_time(self.at),
            "worker": self.worker,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            number=int(data["attempt"]),
            error=str(data["error"]),
            at=parse_time(str(data["at"])),
            worker=str(data["worker"]),
        )


def attempts_to_json(attempts: Sequence[PastAttempt]) -> bytes:
    return json.dumps([a.to_data() for a in attempts], separators=(",", ":")).encode()


def attempts_from_json(raw: bytes) -> list[PastAttempt]:
    """The attempts kept, oldest first; `ValueError` (or `KeyError`) when it is not a list."""
    data = json.loads(raw)
    if not isinstance(data, list):
        raise ValueError("not a list of attempts")
    return [PastAttempt.from_data(item) for item in data]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobState:
    """The answer to "where is job X?" (`QueueManager.status`)."""

    job_id: str
    status: Status
    name: str | None = None
    queue: str | None = None
    attempts: int | None = None
    """Deliveries so far (the running one included)."""
    max_attempts: int | None = None
    due_at: datetime | None = None
    """`delayed`: until when."""
    worker: str | None = None
    """`running`: the worker that runs it (host:pid:...), when its heartbeat lists it."""
    since: datetime | None = None
    """`running`: when the worker started it."""
    lease_until: datetime | None = None
    """`running`: when its lease ends unless renewed."""
    error: str | None = None
    """`failed`: the failed record's error, traceback included."""
    finished_at: datetime | None = None
    """`succeeded` or `failed`: when."""
    has_result: bool = False
    result: Any = None
    reason: str | None = None
    """`unknown`: why nothing more can be said (no such job, a success not recorded, a
    driver that cannot look a job up)."""
    job: QueuedJob | None = None
    """The envelope as stored, when the driver found one."""
    attempt_history: Sequence[PastAttempt] = field(default_factory=tuple)
    """The attempts that did not succeed, oldest first, as their workers recorded them
    (on a driver that keeps records; the last `ATTEMPTS_LISTED`)."""


def worker_key(worker_id: str) -> str:
    return WORKER_KEY + worker_id


def job_key(job_id: str) -> str:
    return JOB_KEY + job_id


def attempts_key(job_id: str) -> str:
    return ATTEMPTS_KEY + job_id


def cancel_key(job_id: str) -> str:
    return CANCEL_KEY + job_id


def cancelled_key(job_id: str) -> str:
    return CANCELLED_KEY + job_id


def keep_record_for(headers: Mapping[str, str]) -> timedelta | None:
    """The retention `KEEP_RECORD_HEADER` asks for, or None (absent or not a number)."""
    text = headers.get(KEEP_RECORD_HEADER)
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        return None
    return timedelta(seconds=seconds) if seconds > 0 else None


__all__ = [
    "CANCELLED_KEPT",
    "CANCELLED_KEY",
    "CANCEL_KEPT",
    "CANCEL_KEY",
    "GONE_AFTER",
    "GONE_KEPT_FOR",
    "HEARTBEAT_EVERY",
    "KEEP_RECORD_HEADER",
    "CancelledJob",
    "Found",
    "JobLookup",
    "JobRemover",
    "JobState",
    "OrderingLookup",
    "Outcome",
    "PastAttempt",
    "RecordStore",
    "RunningJob",
    "Status",
    "Stored",
    "WorkerBeat",
    "attempts_from_json",
    "attempts_key",
    "attempts_to_json",
    "cancel_key",
    "cancelled_key",
    "job_key",
    "keep_record_for",
    "worker_key",
]
