# SPDX-License-Identifier: MIT
"""rainier-queue: background jobs for Python that do not get lost.

A web request dispatches a job; a worker, perhaps on another machine, runs
it later, retries it with the job's own backoff when a dependency blinks,
and records it in the failed store when it finally gives up. Reserve, then
settle, never pop: a worker that dies takes no job with it.

The public surface is what this module exports. The scheduler's part of it
(`Schedule`, `Scheduler`) is imported when first asked for: every worker
process imports this package, and most never schedule anything, so they do
not load the cron parser, the time zones and the scheduler at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .batch_counts import BatchCounts
from .batches import Batch, batch
from .batchstate import BatchProgress
from .chains import Chain, chain
from .connections import ConnectionConfig, QueueConfig
from .context import Dependencies, JobContext
from .dispatch import PendingDispatch
from .envelope import QueuedJob
from .errors import (
    BrokerError,
    BrokerRejected,
    BrokerUnavailable,
    ConfigurationError,
    DeliveryExhausted,
    DuplicateJob,
    HandlerInterrupted,
    HandlerTimedOut,
    JobError,
    JobTimeout,
    LeaseLost,
    LockContended,
    MissingDependency,
    NotProvisioned,
    NotReplicated,
    OutcomeUnknown,
    PayloadError,
    QueueError,
    Retry,
    SpelledOtherwise,
    TLSVerificationError,
    UnknownConnection,
    UnknownJob,
    UnknownOption,
    UnsupportedOperation,
)
from .events import (
    EventDispatcher,
    JobCancelled,
    JobFailed,
    JobProcessed,
    JobProcessing,
    JobReleased,
)
from .explain import Explanation
from .job import Job, JobFunction, job
from .jobstate import JobState, WorkerBeat
from .listeners import QueuedListeners
from .locks import Cache, Lock, LockManager
from .lookup import JobCancelledError, JobFailedError, ResultNotKept
from .manager import QueueManager
from .outbox import Outbox, Relay, RelaySettings
from .queue import (
    Capabilities,
    Countable,
    FailedJob,
    FailedJobStore,
    Finding,
    Pausable,
    Provisionable,
    Queue,
    QueueCounts,
    Reservation,
)
from .registry import JobRegistry
from .worker import Supervisor, Worker, WorkerOptions, WorkerStats, check_worker_settings

if TYPE_CHECKING:
    from .scheduling import Schedule, Scheduler

_ON_FIRST_USE = {"Schedule", "Scheduler"}
"""Exports imported from `scheduling` when first asked for (see the module docs)."""


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        from . import scheduling

        value = getattr(scheduling, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Batch",
    "BatchCounts",
    "BatchProgress",
    "BrokerError",
    "BrokerRejected",
    "BrokerUnavailable",
    "Cache",
    "Capabilities",
    "Chain",
    "ConfigurationError",
    "ConnectionConfig",
    "Countable",
    "DeliveryExhausted",
    "Dependencies",
    "DuplicateJob",
    "EventDispatcher",
    "Explanation",
    "FailedJob",
    "FailedJobStore",
    "Finding",
    "HandlerInterrupted",
    "HandlerTimedOut",
    "Job",
    "JobCancelled",
    "JobCancelledError",
    "JobContext",
    "JobError",
    "JobFailed",
    "JobFailedError",
    "JobFunction",
    "JobProcessed",
    "JobProcessing",
    "JobRegistry",
    "JobReleased",
    "JobState",
    "JobTimeout",
    "LeaseLost",
    "Lock",
    "LockContended",
    "LockManager",
    "MissingDependency",
    "NotProvisioned",
    "NotReplicated",
    "Outbox",
    "OutcomeUnknown",
    "Pausable",
    "PayloadError",
    "PendingDispatch",
    "Provisionable",
    "Queue",
    "QueueConfig",
    "QueueCounts",
    "QueueError",
    "QueueManager",
    "QueuedJob",
    "QueuedListeners",
    "Relay",
    "RelaySettings",
    "Reservation",
    "ResultNotKept",
    "Retry",
    "Schedule",
    "Scheduler",
    "SpelledOtherwise",
    "Supervisor",
    "TLSVerificationError",
    "UnknownConnection",
    "UnknownJob",
    "UnknownOption",
    "UnsupportedOperation",
    "Worker",
    "WorkerBeat",
    "WorkerOptions",
    "WorkerStats",
    "__version__",
    "batch",
    "chain",
    "check_worker_settings",
    "job",
]
