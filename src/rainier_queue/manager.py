# SPDX-License-Identifier: MIT
"""`QueueManager`: where application code dispatches jobs.

It holds the named connections (each a built `Queue`), the job registry,
and the lock manager that makes unique jobs unique. Dispatching is the
one operation that must never leave things half-done, so its order is
deliberate:

1. build and check the envelope (payload, queue name);
2. resolve the connection: an undeclared name is an error, never the default,
   and it is resolved before any lock is taken;
3. take the uniqueness lock, if the job asks for one (a duplicate is dropped
   and reported as None);
4. push; if the push fails, give the lock back, so a failed dispatch does not
   block the retry that follows it. Not when the failure is `OutcomeUnknown`
   (the job may be queued, or is, unreplicated): then a retry is exactly
   the duplicate the lock is there to drop, so the lock stays until the job
   settles or the lock lapses;
5. on a backend that ran the job inside `push` (inline), give the lock back
   too: nobody else will.

`QueueManager.fake()` records instead of pushing, for tests of application
code; its assertions live in `testing.py`'s `FakeAssertions`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from .cache import Lock, LockManager
from .dispatch import DispatchOptions, PendingDispatch, build_envelope, unique_lock_name
from .envelope import QueuedJob
from .errors import OutcomeUnknown, UnknownConnection
from .job import Job
from .queue import Queue
from .registry import JobRegistry
from .testing import FakeAssertions

if TYPE_CHECKING:
    from .blocking import BlockingManager

log = logging.getLogger("rainier_queue.dispatch")

DEFAULT_CONNECTION = "default"


class QueueManager(FakeAssertions):
    """Named connections, the registry and the lock manager, behind `dispatch`."""

    def __init__(
        self,
        default: Queue | None = None,
        *,
        registry: JobRegistry | None = None,
        connections: Mapping[str, Queue] | None = None,
        default_connection: str | None = None,
        locks: LockManager | None = None,
        default_queues: Sequence[str] | None = None,
    ) -> None:
        self.registry = registry if registry is not None else JobRegistry()
        self.locks = locks
        self._connections: dict[str, Queue] = dict(connections or {})
        if default is not None:
            self._default_name = default_connection or DEFAULT_CONNECTION
            self._connections.setdefault(self._default_name, default)
        elif default_connection is not None:
            if default_connection not in self._connections:
                raise UnknownConnection(default_connection, self._connections)
            self._default_name = default_connection
        elif len(self._connections) == 1:
            self._default_name = next(iter(self._connections))
        else:
            raise ValueError("QueueManager needs a default queue or a default_connection name")
        self._default_queues = tuple(q for q in (default_queues or ()) if q.strip())
        self._recorded: list[QueuedJob] | None = None
        self._warned_no_locks = False

    # -- construction ----------------------------------------------------------

    @classmethod
    def fake(
        cls,
        *,
        registry: JobRegistry | None = None,
        connections: Iterable[str] = (),
        locks: LockManager | None = None,
    ) -> QueueManager:
        """A manager that records dispatches instead of pushing them.

        Connection names are checked as on a real manager, so declare the
        ones the code under test uses: `QueueManager.fake(connections=["bulk"])`.
        """
        from .drivers.memory import MemoryQueue

        placeholder = MemoryQueue()
        named: dict[str, Queue] = {name: placeholder for name in connections}
        manager = cls(placeholder, registry=registry, connections=named, locks=locks)
        manager._recorded = []
        return manager

    # -- accessors -------------------------------------------------------------

    @property
    def is_faking(self) -> bool:
        """Whether dispatches are recorded instead of pushed."""
        return self._recorded is not None

    @property
    def default_connection(self) -> str:
        return self._default_name

    def connection_names(self) -> list[str]:
        """Declared connection names, sorted."""
        return sorted(self._connections)

    def connection(self, name: str | None = None) -> Queue:
        """The queue behind connection `name` (the default when None)."""
        key = self._default_name if name is None else name
        try:
            return self._connections[key]
        except KeyError:
            raise UnknownConnection(key, self._connections) from None

    @property
    def queue(self) -> Queue:
        """The default connection's queue."""
        return self._connections[self._default_name]

    def default_queues(self) -> list[str]:
        """Queues a worker serves when told none: the declared list, else `default`."""
        return list(self._default_queues) or ["default"]

    # -- dispatch --------------------------------------------------------------

    def pending(self, job: Job) -> PendingDispatch:
        """A builder for one dispatch: `.delay()`, `.on_queue()`, `.on_connection()`, `.tries()`."""
        return PendingDispatch(self, _require_job(job))

    async def dispatch(self, job: Job) -> str | None:
        """Dispatch `job` with its own options; its id, or None for a dropped duplicate."""
        return await self.pending(job).send()

    async def dispatch_many(self, jobs: Sequence[Job]) -> list[str | None]:
        """Dispatch several jobs with one bulk push per connection, in order.

        Unique jobs whose lock is held come back as None; if a bulk push
        fails, every lock this call took is given back before the error
        propagates, unless it is `OutcomeUnknown` (the jobs may be queued).
        """
        defaults = DispatchOptions()  # read, never changed, by build_envelope
        built = [(build_envelope(_require_job(j), defaults), j) for j in jobs]
        queue = self.queue
        taken: list[Lock] = []
        results: list[str | None] = []
        to_push: list[QueuedJob] = []
        try:
            for envelope, job in built:
                unique_id = job.unique_id()
                if unique_id is None:  # no lock to take (most jobs): no await either
                    to_push.append(envelope)
                    results.append(envelope.id)
                    continue
                locked = await self._take_unique(unique_id, job, envelope)
                if locked is False:
                    results.append(None)
                    continue
                if isinstance(locked, Lock):
                    taken.append(locked)
                    envelope = envelope.with_changes(unique_key=_lock_name(self, locked))
                to_push.append(envelope)
                results.append(envelope.id)
            if self._recorded is not None:
                self._recorded.extend(to_push)
            elif to_push:
                await queue.push_many(to_push)
        except OutcomeUnknown:
            raise  # the jobs may be queued: their locks stay
        except BaseException:
            await self._give_back(taken)
            raise
        if not queue.capabilities.deferred and self._recorded is None:
            await self._give_back(taken)
        return results

    async def _send(self, job: Job, options: DispatchOptions) -> str | None:
        envelope = build_envelope(job, options)
        queue = self.connection(options.connection)
        locked = await self._take_unique(job.unique_id(), job, envelope)
        if locked is False:
            return None
        lock = locked if isinstance(locked, Lock) else None
        if lock is not None:
            envelope = envelope.with_changes(unique_key=_lock_name(self, lock))
        try:
            if self._recorded is not None:
                self._recorded.append(envelope)
                return envelope.id
            job_id = await queue.push(envelope)
        except OutcomeUnknown:
            raise  # the job may be queued: its lock stays
        except BaseException:
            await self._give_back([lock] if lock else [])
            raise
        if lock is not None and not queue.capabilities.deferred:
            await self._give_back([lock])
        return job_id

    async def _take_unique(
        self, unique_id: str | None, job: Job, envelope: QueuedJob
    ) -> Lock | bool:
        """The uniqueness lock: a `Lock` if taken, False for a duplicate, True if none applies."""
        if unique_id is None:
            return True
        if self.locks is None:
            if not self._warned_no_locks:
                self._warned_no_locks = True
                log.warning(
                    "job `%s` asks to be unique but this QueueManager has no lock store; "
                    "dispatching it without deduplication (configure `locks`)",
                    envelope.name,
                )
            return True
        lock = await self.locks.acquire(
            unique_lock_name(envelope.name, unique_id), type(job).unique_for
        )
        if lock is None:
            log.debug("dropping a duplicate of unique job `%s` (%s)", envelope.name, unique_id)
            return False
        return lock

    async def _give_back(self, locks: Sequence[Lock]) -> None:
        if self.locks is None:
            return
        for lock in locks:
            try:
                await self.locks.release(lock)
            except Exception:
                log.warning(
                    "could not give back uniqueness lock %s; it lapses on its own", lock.key
                )

    # -- fakes, facades, lifecycle ---------------------------------------------

    def _recorded_jobs(self) -> list[QueuedJob] | None:
        return self._recorded

    def blocking(self) -> BlockingManager:
        """A facade for code without an event loop (Django or Flask views)."""
        from .blocking import BlockingManager

        return BlockingManager(self)

    async def aclose(self) -> None:
        """Close every connection (each once, even if declared under two names)."""
        seen: set[int] = set()
        for queue in self._connections.values():
            if id(queue) not in seen:
                seen.add(id(queue))
                await queue.aclose()
        if self.locks is not None:
            await self.locks.cache.aclose()

    async def __aenter__(self) -> QueueManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"QueueManager(default={self._default_name!r}, connections={self.connection_names()}, "
            f"jobs={self.registry.names()}, faking={self.is_faking})"
        )


def _require_job(job: object) -> Job:
    if not isinstance(job, Job):
        raise TypeError(
            "dispatch takes a Job instance (or the result of calling an @job function), "
            f"not {type(job).__name__}"
        )
    return job


def _lock_name(manager: QueueManager, lock: Lock) -> str:
    assert manager.locks is not None
    return lock.key[len(manager.locks.prefix) :]
