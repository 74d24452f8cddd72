# SPDX-License-Identifier: MIT
"""Queued listeners: an application event turned into a job, built when the event happens.

An application says what happened (`OrderPlaced(order)`) and lets the
consequences (a receipt, an invoice, a warehouse call) run later, in a
worker, with retries. Wiring that by hand puts a `dispatch` for each
consequence into the code that places the order; a queued listener keeps
it beside the job instead:

    listeners = QueuedListeners(manager)
    listeners.on(OrderPlaced, lambda e: SendReceipt(order_id=e.order.id), queue="mail")
    ...
    await listeners.emit(OrderPlaced(order))

Three rules, each for a reason:

- **The job is built at `emit`, from the event as it is then.** The builder
  copies what the job needs (ids, amounts) into the job's typed fields, and
  the payload is packed there and then. A worker running an hour later
  reads what was true when the event happened, never a live object that
  changed since, and an object that cannot travel (an ORM row, an open
  file) fails at `emit`, in the request that has it, not in a worker.
- **No listener, no job.** An event nobody listens to queues nothing and
  needs no manager; a builder may also return None to let an event pass.
- **A listener with nowhere to dispatch fails, saying what to bind.** An
  event that should have queued work and silently did not is the worst
  outcome, so `emit` with a listener and no manager is a
  `ConfigurationError` naming `QueueManager` and `bind`.

Every listener's job is built and packed before the first is sent, so a
builder that raises, or a job whose fields cannot travel, sends nothing.
Each job then goes through the manager's own dispatch (uniqueness locks,
named connections, instruments), one dispatch per listener.

Inside a database transaction, `emit_in(connection, event)` pushes the jobs
on that transaction (`TransactionalEnqueue`, PostgreSQL's `push_in`): they
exist exactly when it commits. A driver without transactional enqueue
refuses, as does a unique job (its lock lives outside the transaction);
`emit` after the commit is the way there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, overload

from .dispatch import PendingDispatch
from .envelope.packing import DispatchOptions, build_envelope
from .errors import ConfigurationError, UnsupportedOperation
from .job import Job
from .manager import QueueManager
from .queue import TransactionalEnqueue

E = TypeVar("E")

Build = Callable[[E], Job | None]
"""Makes the job for one event (or None, to let this one pass)."""


@dataclass(frozen=True, slots=True)
class _Listener:
    event: type[Any]
    build: Callable[[Any], Job | None]
    queue: str | None
    connection: str | None
    delay: timedelta | None

    def options(self) -> DispatchOptions:
        return DispatchOptions(queue=self.queue, connection=self.connection, delay=self.delay)


class QueuedListeners:
    """Event types mapped to the jobs they queue, dispatched through a bound `QueueManager`."""

    def __init__(self, manager: QueueManager | None = None) -> None:
        self._manager = manager
        self._listeners: list[_Listener] = []

    def bind(self, manager: QueueManager) -> QueuedListeners:
        """Dispatch through `manager` from now on (where the application builds it); self."""
        if not isinstance(manager, QueueManager):
            raise TypeError(
                f"queued listeners dispatch through a QueueManager, not {type(manager).__name__}"
            )
        self._manager = manager
        return self

    @property
    def manager(self) -> QueueManager | None:
        """The manager events are dispatched through; None until one is bound."""
        return self._manager

    @overload
    def on(
        self,
        event: type[E],
        build: Build[E],
        *,
        queue: str | None = None,
        connection: str | None = None,
        delay: timedelta | None = None,
    ) -> Build[E]: ...

    @overload
    def on(
        self,
        event: type[E],
        build: None = None,
        *,
        queue: str | None = None,
        connection: str | None = None,
        delay: timedelta | None = None,
    ) -> Callable[[Build[E]], Build[E]]: ...

    def on(
        self,
        event: type[E],
        build: Build[E] | None = None,
        *,
        queue: str | None = None,
        connection: str | None = None,
        delay: timedelta | None = None,
    ) -> Build[E] | Callable[[Build[E]], Build[E]]:
        """Queue the job `build(event)` makes for each `event` (an instance of it or a subclass).

        `queue`, `connection` and `delay` override the job's own, as
        `pending(job).on_queue(...)` would. Without `build`, a decorator.
        """
        if not isinstance(event, type):
            raise TypeError(f"listen to an event class, not {event!r}")

        def register(builder: Build[E]) -> Build[E]:
            if not callable(builder):
                raise TypeError(f"a listener for {event.__name__} must be callable")
            self._listeners.append(_Listener(event, builder, queue, connection, delay))
            return builder

        return register if build is None else register(build)

    def listening_to(self, event: object) -> bool:
        """Whether any listener would hear `event`."""
        return any(isinstance(event, listener.event) for listener in self._listeners)

    async def emit(self, event: object) -> list[str | None]:
        """Build the job of every listener of `event`, then dispatch each; their ids.

        An id is None where the manager dropped a unique job's duplicate.
        Nothing is dispatched if a builder raises or a job's payload does not
        fit. No listener: nothing, and no manager needed.
        """
        built = self._built(event)
        if not built:
            return []
        manager = self._bound(event)
        return [await self._pending(manager, listener, job).send() for listener, job in built]

    def emit_blocking(self, event: object) -> list[str | None]:
        """`emit` from code without an event loop (a Django or Flask view), through the
        manager's blocking facade (`QueueManager.blocking()`)."""
        built = self._built(event)
        if not built:
            return []
        manager = self._bound(event)
        facade = manager.blocking()
        return [facade.send(self._pending(manager, listener, job)) for listener, job in built]

    async def emit_in(self, connection: Any, event: object) -> list[str]:
        """`emit` inside the caller's transaction on `connection`: the jobs exist exactly when
        it commits (`TransactionalEnqueue`). Refused, sending nothing, where a listener's
        connection cannot push inside a transaction or its job is unique."""
        built = self._built(event)
        if not built:
            return []
        manager = self._bound(event)
        pushes = []
        for listener, job in built:
            queue = manager.connection(listener.connection)
            if not (
                queue.capabilities.transactional_enqueue and isinstance(queue, TransactionalEnqueue)
            ):
                raise UnsupportedOperation(
                    f"the listener of {type(event).__name__} queues `{job.name}` on the "
                    f"{queue.describe()} connection, which cannot push inside your transaction "
                    "(the postgres driver can); nothing was queued: call `emit` once the "
                    "transaction has committed instead"
                )
            if type(job).unique_id is not Job.unique_id and job.unique_id() is not None:
                raise UnsupportedOperation(
                    f"the listener of {type(event).__name__} queues the unique job "
                    f"`{job.name}`, whose lock lives outside your transaction; nothing was "
                    "queued: call `emit` once the transaction has committed instead"
                )
            pushes.append((queue, build_envelope(job, listener.options())))
        return [await queue.push_in(connection, envelope) for queue, envelope in pushes]

    def _built(self, event: object) -> list[tuple[_Listener, Job]]:
        """The job of every listener of `event`, in the order they were registered."""
        built: list[tuple[_Listener, Job]] = []
        for listener in self._listeners:
            if not isinstance(event, listener.event):
                continue
            job = listener.build(event)
            if job is None:
                continue
            if not isinstance(job, Job):
                raise TypeError(
                    f"a listener of {type(event).__name__} returned {type(job).__name__}, not "
                    "a Job (or None to queue nothing): build the job from the event's ids, "
                    "such as `lambda e: SendReceipt(order_id=e.order.id)`"
                )
            built.append((listener, job))
        for listener, job in built:
            # Packed once here, so a job that cannot travel fails before any is sent.
            build_envelope(job, listener.options())
        return built

    def _bound(self, event: object) -> QueueManager:
        if self._manager is None:
            raise ConfigurationError(
                f"{type(event).__name__} has queued listeners but no QueueManager is bound to "
                "dispatch their jobs: bind one where the application builds it, with "
                "`listeners.bind(manager)` (or `QueuedListeners(manager)`)"
            )
        return self._manager

    @staticmethod
    def _pending(manager: QueueManager, listener: _Listener, job: Job) -> PendingDispatch:
        pending = manager.pending(job)
        if listener.queue is not None:
            pending = pending.on_queue(listener.queue)
        if listener.connection is not None:
            pending = pending.on_connection(listener.connection)
        if listener.delay is not None:
            pending = pending.delay(listener.delay)
        return pending

    def __len__(self) -> int:
        return len(self._listeners)

    def __repr__(self) -> str:
        events = sorted({listener.event.__name__ for listener in self._listeners})
        bound = "bound" if self._manager is not None else "unbound"
        return f"QueuedListeners({bound}, events={events})"


__all__ = ["QueuedListeners"]
