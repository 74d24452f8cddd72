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
    MissingDependency,
    NotProvisioned,
    NotReplicated,
    OutcomeUnknown,
    PayloadError,
    QueueError,
    Retry,
    TLSVerificationError,
    UnknownConnection,
    UnknownJob,
    UnknownOption,
    UnsupportedOperation,
)
from .events import EventDispatcher, JobFailed, JobProcessed, JobProcessing, JobReleased
from .job import Job, JobFunction, job
from .locks import Cache, Lock, LockManager
from .manager import QueueManager
from .outbox import Outbox, Relay, RelaySettings
from .queue import (
    Capabilities,
    Countable,
    FailedJob,
    FailedJobStore,
    Finding,
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
    "BrokerError",
    "BrokerRejected",
    "BrokerUnavailable",
    "Cache",
    "Capabilities",
    "ConfigurationError",
    "ConnectionConfig",
    "Countable",
    "DeliveryExhausted",
    "Dependencies",
    "DuplicateJob",
    "EventDispatcher",
    "FailedJob",
    "FailedJobStore",
    "Finding",
    "HandlerInterrupted",
    "HandlerTimedOut",
    "Job",
    "JobContext",
    "JobError",
    "JobFailed",
    "JobFunction",
    "JobProcessed",
    "JobProcessing",
    "JobRegistry",
    "JobReleased",
    "JobTimeout",
    "LeaseLost",
    "Lock",
    "LockManager",
    "MissingDependency",
    "NotProvisioned",
    "NotReplicated",
    "Outbox",
    "OutcomeUnknown",
    "PayloadError",
    "PendingDispatch",
    "Provisionable",
    "Queue",
    "QueueConfig",
    "QueueCounts",
    "QueueError",
    "QueueManager",
    "QueuedJob",
    "Relay",
    "RelaySettings",
    "Reservation",
    "Retry",
    "Schedule",
    "Scheduler",
    "Supervisor",
    "TLSVerificationError",
    "UnknownConnection",
    "UnknownJob",
    "UnknownOption",
    "UnsupportedOperation",
    "Worker",
    "WorkerOptions",
    "WorkerStats",
    "__version__",
    "check_worker_settings",
    "job",
]
