# SPDX-License-Identifier: MIT
"""The manager's calls that steer and look into the system rather than dispatch.

Why apart: dispatching is the manager's one path that must never leave
things half-done (manager.py says in what order); pausing a queue,
cancelling a job, reading a batch's progress, a job's state, its result, why
it waits, or the workers' heartbeats are each one call down to a module of
their own (cancelling.py, batches.py, lookup.py, explain.py) on the
connection a name picks. They live here, as a base of `QueueManager`, so
that the manager's module holds the dispatch path alone. Nothing changes
for a caller: `manager.pause(...)` and the rest are the manager's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

from . import batches, cancelling, lookup
from . import explain as explaining
from .batchstate import BatchProgress
from .cancelling import Cancellation
from .errors import UnsupportedOperation
from .explain import Explanation
from .jobstate import JobState, WorkerBeat
from .limits import found_store, limited_classes
from .locks import LockManager
from .queue import Pausable, Queue
from .registry import JobRegistry


class Connections(Protocol):
    """What a `Steering` call needs of the manager it is a base of (its `self`)."""

    @property
    def registry(self) -> JobRegistry: ...

    @property
    def locks(self) -> LockManager | None: ...

    def connection(self, name: str | None = None) -> Queue: ...


class Steering:
    """Pause, resume, cancel, and what a job, a batch or the workers are doing now.

    Each call's `self` is a `Connections` (the manager): a base with no state
    and nothing of its own to stand in for."""

    # -- pausing queues ----------------------------------------------------------

    async def pause(self: Connections, queue: str, *, connection: str | None = None) -> bool:
        """Pause `queue` on a connection: its workers take none of its jobs until `resume`.

        Pushes are still taken. Every worker of the connection, on any
        machine, stops taking the queue's jobs within its `pause_check` (a
        second by default). True if the queue was not paused already.
        `UnsupportedOperation`, storing nothing, on a driver that cannot.
        """
        return await pausable(self.connection(connection)).pause(_queue_name(queue))

    async def resume(self: Connections, queue: str, *, connection: str | None = None) -> bool:
        """Let workers take `queue`'s jobs again; True if it was paused."""
        return await pausable(self.connection(connection)).resume(_queue_name(queue))

    async def paused(
        self: Connections, queues: Sequence[str], *, connection: str | None = None
    ) -> frozenset[str]:
        """Which of `queues` are paused on a connection."""
        return await pausable(self.connection(connection)).paused(list(queues))

    async def cancel(
        self: Connections, job_id: str, *, connection: str | None = None
    ) -> Cancellation:
        """Cancel job `job_id`: removed if it waits (where the driver can remove one job),
        else marked, and a worker running it asks its handler to stop within its
        `pause_check`. It ends as cancelled, neither failed nor retried.

        `UnsupportedOperation`, storing nothing, on a driver that cannot
        (`Capabilities.cancellable`); see docs/flow-control.md.
        """
        return await cancelling.cancel(self.connection(connection), job_id)

    async def batch(
        self: Connections, batch_id: str, *, connection: str | None = None
    ) -> BatchProgress:
        """Batch `batch_id` now: its total, how many succeeded, failed, were cancelled and
        are pending, and whether it finished (its callbacks then queued).

        `LookupError` if the connection has no such batch (never made there, or finished
        more than a week ago); `UnsupportedOperation` on a driver that keeps no batches.
        """
        found = await batches.progress(self.connection(connection), batch_id)
        if found is None:
            raise LookupError(
                f"no batch {batch_id} on the {self.connection(connection).describe()} "
                "connection: it was dispatched to another, or finished more than a week ago"
            )
        return found

    # -- seeing the system (lookup.py) --------------------------------------------------

    async def status(self: Connections, job_id: str, connection: str | None = None) -> JobState:
        """Where job `job_id` is: queued, delayed, running, succeeded, failed or unknown.

        Answered from the connection's own storage and the records its workers
        keep (`docs/operations.md`); `unknown` says why, including on a driver
        that cannot look a job up by id.
        """
        return await lookup.status(self.connection(connection), job_id)

    async def result(
        self: Connections,
        job_id: str,
        *,
        timeout: timedelta | float | None = None,
        connection: str | None = None,
    ) -> Any:
        """Job `job_id`'s return value, waiting up to `timeout` (None: for ever) for it.

        Only a job whose class sets `keep_result` has one recorded. Raises
        `JobFailedError` when the job failed for good, `ResultNotKept` when it
        succeeded without a recorded value, and `TimeoutError` when it is not
        done in time.
        """
        return await lookup.result(self.connection(connection), job_id, timeout=timeout)

    async def explain(self: Connections, job_id: str, connection: str | None = None) -> Explanation:
        """Why job `job_id` is not running, in plain words, and what would change that.

        `Explanation.code` is the deciding reason for a script, `lines` the answer
        for a person (`rainier-queue explain`, docs/operations.md).
        """
        queue = self.connection(connection)
        store = found_store(queue, self.locks) if limited_classes(self.registry) else None
        at = None if store is None else explaining.LimitsAt(store, self.registry)
        return await explaining.explain(queue, job_id, limits=at)

    async def workers(self: Connections, connection: str | None = None) -> list[WorkerBeat]:
        """The heartbeats of the workers on a connection, gone ones included (`is_gone`)."""
        return await lookup.workers(self.connection(connection))


def pausable(queue: Queue) -> Pausable:
    """`queue` as a `Pausable`, or a refusal that says why not and what to do instead."""
    if queue.capabilities.pausable and isinstance(queue, Pausable):
        return queue
    raise UnsupportedOperation(
        f"the {queue.describe()} connection cannot pause a queue: the {queue.name} driver has "
        "no store that every worker reads to keep the mark in, so nothing was paused. "
        "To hold a queue's jobs there, stop the workers that serve it (or start them "
        "without it in `--queue`); the drivers that can pause are named in docs/flow-control.md"
    )


def _queue_name(queue: object) -> str:
    if not isinstance(queue, str) or not queue.strip():
        raise ValueError(f"a queue to pause or resume needs a name, not {queue!r}")
    return queue


__all__ = ["Steering", "pausable"]
