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

`dispatch`, a configured `pending(job).send()` and `dispatch_many` all take
this one path (`_send_all`); they differ only in how many jobs it carries
and whether the push is one job or a bulk push.

Given observers (`instrument.py`), the manager pushes through an
`InstrumentedQueue` around each connection, so instruments see every
dispatch; without them it pushes to the driver itself and pays nothing.

`QueueManager.fake()` is this same manager over a `RecordingQueue`, a
driver that keeps what is pushed instead of sending it. The fake and the
assertions that read its record live in `testing.py`, which this module
imports only when a test asks for a fake (or asserts on a real manager):
production code that dispatches never loads it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from .blocking import BlockingManager
from .context import Dependencies
from .dispatch import PendingDispatch
from .drivers.inline import InlineQueue
from .envelope import QueuedJob
from .envelope.packing import (
    DEFAULTS,
    DispatchOptions,
    build_envelope,
    build_envelopes,
    check_queue_name,
    unique_lock_name,
)
from .errors import ConfigurationError, OutcomeUnknown, UnknownConnection
from .instrument import PushScope, QueueObserver, instrumented
from .job import Job
from .locks import Lock, LockManager
from .outbox import Outbox
from .outbox.frameworks import client_connection
from .queue import Queue
from .registry import JobRegistry
from .steering import Steering

if TYPE_CHECKING:
    from .testing import FakeQueueManager

log = logging.getLogger("rainier_queue.dispatch")

DEFAULT_CONNECTION = "default"


class QueueManager(Steering):
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
        observers: Sequence[QueueObserver] = (),
        dependencies: Dependencies | None = None,
        push_scopes: Sequence[PushScope] = (),
        outboxes: Mapping[str, Outbox] | None = None,
    ) -> None:
        self.registry = registry if registry is not None else JobRegistry()
        self.locks = locks
        self.dependencies = dependencies if dependencies is not None else Dependencies()
        """What a job run in this process (`dispatch_now`) is given in its context."""
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
        self._default_queues = _trimmed_queue_names(default_queues or ())
        self._observers = tuple(observers)
        self._push_scopes = tuple(push_scopes)
        self._ports = _instrumented_all(self._connections, self._observers, self._push_scopes)
        """What dispatch pushes through: the connections themselves, or, with
        observers or push scopes, each behind an `InstrumentedQueue` that tells them."""
        self._outboxes: dict[str, Outbox] = dict(outboxes or {})
        for name in self._outboxes:
            if name not in self._connections:
                raise UnknownConnection(name, self._connections)
        self._warned_no_locks = False
        self._blocking: BlockingManager | None = None
        self._blocking_lock = threading.Lock()

    # -- construction ----------------------------------------------------------

    def add_instruments(
        self, *, observers: Sequence[QueueObserver] = (), push_scopes: Sequence[PushScope] = ()
    ) -> None:
        """Let more instruments see this manager's dispatches from now on.

        For the code that runs an application it did not build, such as
        `rainier-queue work --metrics-port`, whose handlers dispatch through
        the application's own manager. Dispatches already under way are not seen.
        """
        self._observers += tuple(observers)
        self._push_scopes += tuple(push_scopes)
        self._ports = _instrumented_all(self._connections, self._observers, self._push_scopes)

    @classmethod
    def fake(
        cls,
        *,
        registry: JobRegistry | None = None,
        connections: Iterable[str] = (),
        locks: LockManager | None = None,
        default_queues: Sequence[str] = (),
    ) -> FakeQueueManager:
        """A manager that records dispatches instead of pushing them.

        Connection names are checked as on a real manager, so declare the
        ones the code under test uses: `QueueManager.fake(connections=["bulk"])`.
        Every connection records into one `RecordingQueue`, so the record
        keeps the order of dispatch across connections.
        """
        # The fake's home is testing.py, above this module; imported here, when a test asks.
        from .drivers.recording import RecordingQueue
        from .testing import FakeQueueManager

        return FakeQueueManager(
            RecordingQueue(),
            registry=registry,
            connections=connections,
            locks=locks,
            default_queues=default_queues,
        )

    # -- accessors -------------------------------------------------------------

    @property
    def is_faking(self) -> bool:
        """Whether dispatches are recorded instead of pushed (`QueueManager.fake()`)."""
        return False

    @property
    def default_connection(self) -> str:
        return self._default_name

    def connection_names(self) -> list[str]:
        """Declared connection names, sorted."""
        return sorted(self._connections)

    def has_connection(self, name: str) -> bool:
        """Whether a connection called `name` is declared."""
        return name in self._connections

    def connection(self, name: str | None = None) -> Queue:
        """The queue behind connection `name` (the default when None)."""
        key = self._default_name if name is None else name
        try:
            return self._connections[key]
        except KeyError:
            raise UnknownConnection(key, self._connections) from None

    def _port(self, name: str | None) -> Queue:
        """`connection(name)` as dispatch pushes through it (instrumented, with observers)."""
        key = self._default_name if name is None else name
        try:
            return self._ports[key]
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
        return PendingDispatch(self._send, _require_job(job))

    async def dispatch(
        self,
        job: Job,
        *,
        queue: str | None = None,
        delay: timedelta | float | None = None,
        at: datetime | None = None,
        connection: str | None = None,
        tries: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str | None:
        """Dispatch `job`; its id, or None for a dropped duplicate.

        Each keyword overrides one of the job's own options for this
        dispatch, as the `pending(job)` builder's step of the same name does:
        `queue`, `delay` (a timedelta or seconds) or `at` (naive times are
        UTC), `connection` (which backend), `tries` (at least 1), `headers`.
        """
        options = _options(
            queue=queue, delay=delay, at=at, connection=connection, tries=tries, headers=headers
        )
        return await self._send(_require_job(job), options)

    async def dispatch_on(self, queue: str, job: Job) -> str | None:
        """Dispatch `job` to `queue` instead of its own: `dispatch(job, queue=queue)`."""
        return await self.dispatch(job, queue=queue)

    async def dispatch_after(self, delay: timedelta | float, job: Job) -> str | None:
        """Dispatch `job` due after `delay` (a timedelta or seconds): `dispatch(job, delay=...)`."""
        return await self.dispatch(job, delay=delay)

    async def dispatch_now(self, job: Job, *, dependencies: Dependencies | None = None) -> str:
        """Run `job` here and now, through the registry, and queue nothing; its id.

        The job is packed and checked as a dispatch would (so a bad payload
        fails the same way), then its handler runs in this task as attempt
        1 of 1: a failure runs its `failed` hook and then reaches the caller.
        No connection is used and no uniqueness lock is taken. The job's name
        must be registered. `dependencies` default to the manager's.
        """
        envelope = build_envelope(_require_job(job))
        inline = InlineQueue(self.registry, dependencies or self.dependencies)
        return await inline.run(envelope)

    async def release_uniqueness(self, job_or_key: Job | str) -> bool:
        """Give back a unique job's lock, whoever took it, so a new dispatch is accepted again.

        Takes the job (its name and `unique_id()` make the key) or the key as
        the envelope carries it (`QueuedJob.unique_key`, `unique:NAME:ID`).
        True if a lock was there to release; False if none was, or if this
        manager has no lock store. For a job whose dispatcher is gone and
        whose worker never gave the lock back; the lock ignores who holds it.
        """
        key = _unique_key(job_or_key)
        if self.locks is None:
            return False
        return await self.locks.force_release(key)

    async def dispatch_many(
        self,
        jobs: Sequence[Job],
        *,
        connection: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> list[str | None]:
        """Dispatch several jobs with one bulk push, in order, on the default connection
        or `connection`, each with `headers` added to its own.

        Unique jobs whose lock is held come back as None; if a bulk push
        fails, every lock this call took is given back before the error
        propagates, unless it is `OutcomeUnknown` (the jobs may be queued).
        """
        options = DEFAULTS
        if connection is not None or headers:
            options = DispatchOptions(connection=connection, headers=dict(headers or {}))
        return await self._send_all([(_require_job(job), options) for job in jobs], bulk=True)

    async def _send(self, job: Job, options: DispatchOptions) -> str | None:
        """One job, pushed on its own (what `PendingDispatch.send` calls)."""
        [job_id] = await self._send_all([(job, options)], bulk=False)
        return job_id

    async def _send_all(
        self, items: Sequence[tuple[Job, DispatchOptions]], *, bulk: bool
    ) -> list[str | None]:
        """Pack, resolve, lock and push `items`; an id per item, None for a dropped duplicate.

        Every job is packed and every connection resolved before the first
        lock is taken, so a bad job or an undeclared connection leaves
        nothing half-done. With `bulk`, each connection gets one
        `push_many`; without, the one job goes by `push` and its id is the
        one the driver answers.
        """
        envelopes = build_envelopes(items)
        ports = {options.connection: self._port(options.connection) for _, options in items}
        taken: list[tuple[Lock, Queue]] = []
        results: list[str | None] = []
        batches: dict[int, tuple[Queue, list[QueuedJob]]] = {}
        try:
            # A job class that does not override `unique_id` has none: not asking saves
            # a call per job. Most jobs take no lock, and so no await either.
            never_unique: dict[type[Job], bool] = {}
            for (job, options), envelope in zip(items, envelopes, strict=True):
                queue = ports[options.connection]
                plain = never_unique.get(type(job))
                if plain is None:
                    plain = never_unique[type(job)] = type(job).unique_id is Job.unique_id
                unique_id = None if plain else job.unique_id()
                if unique_id is not None:
                    locked = await self._take_unique(unique_id, job, envelope)
                    if locked is False:
                        results.append(None)
                        continue
                    if isinstance(locked, Lock):
                        taken.append((locked, queue))
                        envelope = envelope.with_changes(unique_key=_lock_name(self, locked))
                batch = batches.get(id(queue))
                if batch is None:
                    batch = batches[id(queue)] = (queue, [])
                batch[1].append(envelope)
                results.append(envelope.id)
            for queue, envelopes_of_queue in batches.values():
                if queue.payload_keys is not None:  # docs/encryption.md
                    envelopes_of_queue = list(queue.sealed(envelopes_of_queue))
                if bulk:
                    await queue.push_many(envelopes_of_queue)
                else:
                    results = [await queue.push(envelopes_of_queue[0])]
        except OutcomeUnknown:
            raise  # the jobs may be queued: their locks stay
        except BaseException:
            await self._give_back([lock for lock, _ in taken])
            raise
        # A backend that ran the job inside `push` (inline) is done with it: nobody
        # else will give its lock back.
        if taken:
            ran = [lock for lock, queue in taken if not queue.capabilities.deferred]
            if ran:
                await self._give_back(ran)
        return results

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

    # -- inside the application's transaction -----------------------------------

    def outbox(self, name: str | None = None) -> Outbox | None:
        """The outbox of connection `name` (the default when None), or None without one."""
        key = self._default_name if name is None else name
        self.connection(key)  # an undeclared name is an error, never None
        return self._outboxes.get(key)

    async def dispatch_in(
        self, transaction: Any, job: Job, *, on_connection: str | None = None
    ) -> str:
        """Dispatch `job` inside the application's open transaction on `transaction`.

        The job reaches its connection exactly when that transaction commits:
        through the connection's outbox when it has one (`outbox = ...` in its
        table; a relay moves committed rows), else by the connection's own
        `push_in` when it can join the transaction (PostgreSQL, MySQL/MariaDB,
        SQLite). `transaction` is the application's connection of that
        database's client, or a SQLAlchemy session or connection over one.
        No uniqueness lock is taken (it lives outside the transaction).
        Returns the job's id.
        """
        return (await self.dispatch_many_in(transaction, [job], on_connection=on_connection))[0]

    async def dispatch_many_in(
        self, transaction: Any, jobs: Sequence[Job], *, on_connection: str | None = None
    ) -> list[str]:
        """`dispatch_in` for several jobs, in order, in one write."""
        envelopes = build_envelopes([(_require_job(job), DEFAULTS) for job in jobs])
        name = self._default_name if on_connection is None else on_connection
        queue = self.connection(name)
        # Sealed here, under the target connection's key ring, so no payload waits in
        # the outbox table (or the application's transaction) in the clear.
        envelopes = list(queue.sealed(envelopes))
        outbox = self._outboxes.get(name)
        if outbox is not None:
            return await outbox.dispatch_many_in(transaction, envelopes)
        many = getattr(queue, "push_many_in", None)
        transaction = await client_connection(transaction)
        if many is None:
            raise ConfigurationError(
                f"connection `{name}` ({queue.describe()}) cannot join the application's "
                "transaction: give it an outbox in the application's database "
                f'([connections.{name}] outbox = "postgresql://..."; docs/outbox.md)'
            )
        return list(await many(transaction, envelopes))

    # -- facades, lifecycle -------------------------------------------------------

    def blocking(self) -> BlockingManager:
        """This manager's one facade for code without an event loop (Django or Flask views).

        Built on the first call and the same one on every later call, from
        any thread: one private loop thread owns this manager's connections
        from then on, and request threads share it. Close it once
        (`close()`, a `with` block); an exit hook closes it otherwise. From
        async code, `await manager.dispatch(job)` on a manager of its own.
        """
        with self._blocking_lock:
            if self._blocking is None:
                self._blocking = BlockingManager(self)
            return self._blocking

    async def aclose(self) -> None:
        """Close every connection (each once, even if declared under two names)."""
        seen: set[int] = set()
        for queue in self._connections.values():
            if id(queue) not in seen:
                seen.add(id(queue))
                await queue.aclose()
        for outbox in self._outboxes.values():
            await outbox.aclose()
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

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> NoReturn:
            # A test that asserts on a real manager, which pushed and recorded
            # nothing, must fail for that reason and say so, not with a bare
            # AttributeError. Only for names nothing else answered, so it costs
            # nothing on any other path.
            from .testing import ASSERTIONS, not_faking

            if name in ASSERTIONS:
                raise not_faking()
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _options(
    *,
    queue: str | None,
    delay: timedelta | float | None,
    at: datetime | None,
    connection: str | None,
    tries: int | None,
    headers: Mapping[str, str] | None,
) -> DispatchOptions:
    """The `DispatchOptions` of `dispatch`'s keywords; the shared default when none is given."""
    given = (queue, delay, at, connection, tries)
    if all(value is None for value in given) and not headers:
        return DEFAULTS
    if delay is not None and at is not None:
        raise ValueError("dispatch takes `delay` or `at`, not both: they say the same thing")
    return DispatchOptions(
        queue=None if queue is None else check_queue_name(queue),
        connection=connection,
        delay=delay if isinstance(delay, timedelta | None) else timedelta(seconds=delay),
        at=at,
        tries=None if tries is None else max(1, tries),
        headers=dict(headers or {}),
    )


def _unique_key(job_or_key: object) -> str:
    """The uniqueness lock's name for a job, or a key given as the envelope carries it."""
    if isinstance(job_or_key, str):
        if not job_or_key.startswith("unique:"):
            raise ValueError(
                f"{job_or_key!r} is not a uniqueness key; pass the job, or the key its "
                "envelope carries (`QueuedJob.unique_key`, such as 'unique:send-welcome:42')"
            )
        return job_or_key
    job = _require_job(job_or_key)
    unique_id = job.unique_id()
    if unique_id is None:
        raise ValueError(
            f"job `{type(job).name}` is not unique (its unique_id() is None), so it has no "
            "uniqueness lock to release"
        )
    return unique_lock_name(type(job).name, unique_id)


def _trimmed_queue_names(names: Iterable[str]) -> tuple[str, ...]:
    """Queue names as declared, each trimmed, blanks dropped, order kept."""
    return tuple(name.strip() for name in names if name.strip())


def _require_job(job: object) -> Job:
    if not isinstance(job, Job):
        raise TypeError(
            "dispatch takes a Job instance (or the result of calling an @job function), "
            f"not {type(job).__name__}"
        )
    return job


def _instrumented_all(
    connections: Mapping[str, Queue],
    observers: Sequence[QueueObserver],
    push_scopes: Sequence[PushScope],
) -> Mapping[str, Queue]:
    """Each connection behind one wrapper (one per queue, even under two names); as is if none."""
    if not observers and not push_scopes:
        return connections
    wrapped: dict[int, Queue] = {}
    return {
        name: wrapped.setdefault(id(queue), instrumented(queue, observers, push_scopes))
        for name, queue in connections.items()
    }


def _lock_name(manager: QueueManager, lock: Lock) -> str:
    assert manager.locks is not None
    return lock.key[len(manager.locks.prefix) :]


def __getattr__(name: str) -> Any:
    # `from rainier_queue.manager import FakeQueueManager` keeps working; its home is testing.py.
    if name == "FakeQueueManager":
        from .testing import FakeQueueManager

        return FakeQueueManager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
