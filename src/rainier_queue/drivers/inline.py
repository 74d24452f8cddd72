# SPDX-License-Identifier: MIT
"""`InlineQueue` (scheme and config name `sync`): run the job inside `push`.

## Read this before choosing it

Nothing is queued. `dispatch` runs the job there and then, in the
dispatching task, and the job's error reaches the caller. That is what you
want in a unit test of the code that dispatches, or in a script where
"later" is pointless; it is never what you want in a web request. Delays
are ignored (the job runs at once), there is exactly one attempt (so a
failure runs the job's `failed` hook), and there are no reservations, so
`reserve` always finds nothing.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from typing_extensions import override

from ..context import Dependencies, JobContext
from ..envelope import QueuedJob
from ..errors import UnsupportedOperation
from ..queue import Capabilities, Queue, Reservation
from ..registry import JobRegistry
from .options import Options
from .unordered import refuse_ordering_keys

if TYPE_CHECKING:
    from . import DriverContext


class InlineQueue(Queue):
    """Runs each pushed job immediately, once, in the caller's task."""

    name: ClassVar[str] = "sync"
    idle_wait: ClassVar[str] = "none: it runs each job inside dispatch, and no worker waits"
    capabilities: ClassVar[Capabilities] = Capabilities(
        deferred=False,
        survives_restart=False,
        shared_between_processes=False,
        renews_leases=False,
        reclaims_lapsed_leases=False,
        failed_store=False,
        failed_listing=False,
    )
    OPTIONS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`sync://` (or `inline://`); takes no options."""
        Options.from_url(url, cls.OPTIONS, "the `sync` driver", options)
        return cls(context.registry, context.dependencies)

    def __init__(self, registry: JobRegistry, dependencies: Dependencies | None = None) -> None:
        self.registry = registry
        self.dependencies = dependencies or Dependencies()

    @override
    async def push(self, job: QueuedJob) -> str:
        refuse_ordering_keys(
            self,
            "it runs each job inside its dispatch, so jobs dispatched from several tasks at "
            "once run at once",
            (job,),
        )
        return await self.run(job)

    async def run(self, job: QueuedJob) -> str:
        """Run `job` here and now, once (`QueueManager.dispatch_now`, which keeps no order)."""
        instance = self.registry.build(job)
        ctx = JobContext(
            job_id=job.id,
            name=job.name,
            queue=job.queue,
            attempt=1,
            max_attempts=1,
            headers=job.headers,
            dependencies=self.dependencies,
        )
        try:
            await _call(instance.handle, ctx)
        except Exception as exc:
            await _call(instance.failed, ctx, exc)
            raise
        return job.id

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        return []

    def _no_reservations(self) -> UnsupportedOperation:
        return UnsupportedOperation(
            "the sync driver runs jobs inside push and hands out no reservations to settle"
        )

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        raise self._no_reservations()

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        raise self._no_reservations()

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        raise self._no_reservations()

    @override
    async def size(self, queue: str) -> int:
        return 0

    @override
    async def clear(self, queue: str) -> int:
        return 0


async def _call(fn: Any, *args: Any) -> None:
    if inspect.iscoroutinefunction(fn):
        await fn(*args)
        return
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        await result
