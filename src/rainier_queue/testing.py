# SPDX-License-Identifier: MIT
"""Test helpers for applications that dispatch jobs.

`QueueManager.fake()` is a `FakeQueueManager`: the manager over a
`RecordingQueue`, a driver that keeps every pushed envelope instead of
sending it, with the assertions below that read that record. They live
here, in the one module an application's tests import, and nowhere in the
production manager, which imports this module only when a fake is asked
for. Each one fails loudly when called on a real manager, because a test
that asserts against a manager that really pushed would pass or fail for
the wrong reasons.

```python
manager = QueueManager.fake(registry=registry)
await signup(manager, email="a@b.c")
manager.assert_pushed(SendWelcome, times=1, where=lambda job: job.email == "a@b.c")
await manager.run_all()            # or manager.run_all_sync() in a plain `def` test
```

A test of what a job does, not only that it was dispatched, runs the record:
`run_all()` hands each recorded job to its handler in the fake's registry,
in dispatch order, the way a worker would (a real `JobContext`, the job's
attempts, its `failed` hook on the last), without a broker, a worker or
their timing. Delays and backoff are not waited for. A job its handlers
dispatch in turn is recorded too, and runs after those already waiting, in
the same call. Recorded jobs stay in the record for the assertions, and
each runs once: a second `run_all()` runs only what was dispatched since.

With pytest, the `fake_queue_manager` fixture (this package's pytest
plugin, `rainier_queue.pytest_plugin`) hands each test a fresh one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .batchstate import BATCH, BatchStore, Outcome, batch_store_of, member
from .chains import next_step
from .context import Dependencies, JobContext
from .drivers.recording import RecordingQueue
from .envelope import QueuedJob
from .errors import JobError, Retry, UnknownJob
from .job import Job, JobFunction, is_async_handler
from .locks import LockManager
from .manager import QueueManager
from .queue import Queue
from .registry import JobRegistry

J = TypeVar("J", bound=Job)

JobType = type[Job] | JobFunction[Any]


def _class_of(job_type: JobType) -> type[Job]:
    return job_type.job_class if isinstance(job_type, JobFunction) else job_type


class NotFaking(AssertionError, AttributeError):
    """An assertion made on a manager that pushes rather than records.

    An `AssertionError`, so the test fails and says why; also an
    `AttributeError`, since a real manager has no such method: `hasattr` and
    `getattr(manager, name, default)` answer False and the default rather
    than raise.
    """


def not_faking() -> NotFaking:
    """The error for an assertion made on a manager that pushes rather than records."""
    return NotFaking(
        "this assertion needs a faking manager: build it with QueueManager.fake(); "
        "a real manager pushes jobs and records nothing"
    )


RUN_LIMIT = 1000
"""Jobs one `run_all()` runs at most before it calls the jobs a loop (`limit=` raises it)."""


@dataclass(frozen=True, slots=True)
class JobRun:
    """What became of one recorded job that `run_all()` ran."""

    envelope: QueuedJob
    attempts: int
    """Attempts made: 1 for a job that succeeded at once; 0 for one that could not be built."""
    error: BaseException | None = None
    """Why its last attempt failed; None when it succeeded."""

    @property
    def succeeded(self) -> bool:
        return self.error is None


class FakeAssertions:
    """The test half of a faking `QueueManager`: questions about the record, and running it."""

    registry: JobRegistry

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._ran: set[str] = set()
        """Ids of the recorded jobs `run_all` has run, so each runs once."""
        super().__init__(*args, **kwargs)

    def _recorded_jobs(self) -> list[QueuedJob] | None:
        """The record to read; None when there is none (the error says why)."""
        raise NotImplementedError

    def _batches(self) -> BatchStore | None:
        """Where the faked batches are kept; None when there is none."""
        return None

    def _record(self) -> list[QueuedJob]:
        recorded = self._recorded_jobs()
        if recorded is None:
            raise not_faking()
        return recorded

    def all_pushed(self) -> list[QueuedJob]:
        """Every recorded envelope, in dispatch order."""
        return list(self._record())

    def pushed(self, job_type: JobType) -> list[Job]:
        """The recorded jobs of one type, rebuilt from their payloads."""
        cls = _class_of(job_type)
        return [cls.from_payload(e.payload) for e in self._record() if e.name == cls.name]

    def pushed_envelopes(self, job_type: JobType) -> list[QueuedJob]:
        """The recorded envelopes of one type (queue, delay, attempts, headers)."""
        cls = _class_of(job_type)
        return [e for e in self._record() if e.name == cls.name]

    def assert_pushed(
        self,
        job_type: JobType,
        *,
        times: int | None = None,
        where: Callable[[Any], bool] | None = None,
    ) -> None:
        """Assert jobs of this type were dispatched (`times` exactly, matching `where`)."""
        cls = _class_of(job_type)
        matching = [j for j in self.pushed(cls) if where is None or where(j)]
        if times is None and not matching:
            raise AssertionError(
                f"expected job `{cls.name}` to be pushed"
                + (" matching the condition" if where else "")
                + f"; pushed: {self._summary()}"
            )
        if times is not None and len(matching) != times:
            raise AssertionError(
                f"expected job `{cls.name}` pushed {times} time(s)"
                + (" matching the condition" if where else "")
                + f", got {len(matching)}; pushed: {self._summary()}"
            )

    def assert_pushed_on(self, queue: str, job_type: JobType | None = None) -> None:
        """Assert something (of this type, if given) was dispatched to `queue`."""
        record = self._record()
        name = _class_of(job_type).name if job_type is not None else None
        if not any(e.queue == queue and (name is None or e.name == name) for e in record):
            seen = sorted({e.queue for e in record if name is None or e.name == name})
            what = f"job `{name}`" if name else "a job"
            raise AssertionError(
                f"expected {what} on queue `{queue}`; queues seen: {', '.join(seen) or 'none'}"
            )

    def assert_not_pushed(self, job_type: JobType) -> None:
        """Assert no job of this type was dispatched."""
        cls = _class_of(job_type)
        count = sum(1 for e in self._record() if e.name == cls.name)
        if count:
            raise AssertionError(
                f"expected job `{cls.name}` not to be pushed; it was, {count} time(s)"
            )

    def assert_nothing_pushed(self) -> None:
        """Assert nothing at all was dispatched."""
        record = self._record()
        if record:
            raise AssertionError(f"expected nothing pushed; pushed: {self._summary()}")

    async def run_all(
        self,
        *,
        dependencies: Dependencies | None = None,
        raise_failures: bool = True,
        limit: int = RUN_LIMIT,
    ) -> list[JobRun]:
        """Run every recorded job not run yet, and those they dispatch, through their handlers.

        Each job gets the attempts it was dispatched with, one after another
        (no backoff, no delay), then its `failed` hook. With
        `raise_failures` (the default) the first job that fails for good
        stops the run and its error is raised, as it is, so `pytest.raises`
        names it; the jobs after it stay for the next call. Without, each
        failure is in the returned `JobRun` and the run goes on. Handlers get
        `dependencies` in their context. More than `limit` jobs in one call
        is taken for jobs that keep dispatching each other, and refused.
        """
        record = self._record()
        runs: list[JobRun] = []
        while (envelope := next((e for e in record if e.id not in self._ran), None)) is not None:
            if len(runs) >= limit:
                raise _runaway(runs, limit)
            self._ran.add(envelope.id)
            run = await run_recorded(envelope, self.registry, dependencies or Dependencies())
            runs.append(run)
            if run.error is None and (step := next_step(envelope)) is not None:
                record.append(step)  # as a worker pushes a chain's next step
            if BATCH in envelope.headers:  # as a worker records a batch's job
                await self._record_in_batch(envelope, run)
            if run.error is not None and raise_failures:
                raise run.error
        return runs

    async def _record_in_batch(self, envelope: QueuedJob, run: JobRun) -> None:
        belongs = member(envelope.headers)
        store = self._batches()
        if belongs is not None and store is not None:
            outcome = Outcome.SUCCEEDED if run.error is None else Outcome.FAILED
            await store.record_in_batch(belongs, envelope.id, outcome)

    def run_all_sync(
        self,
        *,
        dependencies: Dependencies | None = None,
        raise_failures: bool = True,
        limit: int = RUN_LIMIT,
    ) -> list[JobRun]:
        """`run_all()` for a plain `def` test (or any code with no event loop running)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_all_sync() was called inside a running event loop; there, use "
                "`await manager.run_all()`"
            )
        return asyncio.run(
            self.run_all(dependencies=dependencies, raise_failures=raise_failures, limit=limit)
        )

    def _summary(self) -> str:
        record = self._record()
        if not record:
            return "nothing"
        return ", ".join(f"`{e.name}` on `{e.queue}`" for e in record)


async def run_recorded(
    envelope: QueuedJob, registry: JobRegistry, dependencies: Dependencies
) -> JobRun:
    """Run one recorded job as a worker would, attempt after attempt; never raises for the job.

    A plain `def` handler runs in a thread, as in the worker, so it may
    dispatch through the manager's blocking facade.
    """
    if not registry.knows(envelope.name):
        return JobRun(envelope, 0, _not_registered(envelope.name, registry.names()))
    attempts = max(envelope.max_attempts, 1)
    error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            job = registry.build(envelope)
        except Exception as exc:
            return JobRun(envelope, 0, exc)
        ctx = JobContext(
            job_id=envelope.id,
            name=envelope.name,
            queue=envelope.queue,
            attempt=attempt,
            max_attempts=attempts,
            headers=envelope.headers,
            dependencies=dependencies,
        )
        try:
            if is_async_handler(type(job)):
                await _settled(job.handle(ctx))
            else:
                await _settled(await asyncio.to_thread(job.handle, ctx))
        except (Exception, Retry) as exc:
            error = exc
            continue
        return JobRun(envelope, attempt)
    assert error is not None
    if isinstance(error, Retry):
        error = JobError(
            f"job `{envelope.name}` asked to be retried ({error.reason}) on its last attempt "
            f"({attempts} of {attempts})"
        )
    if type(job).failed is not Job.failed:
        if inspect.iscoroutinefunction(job.failed):
            await _settled(job.failed(ctx, error))
        else:
            await _settled(await asyncio.to_thread(job.failed, ctx, error))
    return JobRun(envelope, attempts, error)


async def _settled(result: object) -> None:
    if inspect.isawaitable(result):
        await result


def _not_registered(name: str, names: list[str]) -> UnknownJob:
    known = ", ".join(f"`{n}`" for n in names) or "none"
    error = UnknownJob(name, names)
    error.args = (
        f"job `{name}` was dispatched, but the fake manager's registry has no handler for it "
        f"(registered: {known}), so it cannot run; build the fake with "
        "QueueManager.fake(registry=registry), or return the registry from the "
        "`fake_queue_registry` fixture",
    )
    return error


def _runaway(runs: list[JobRun], limit: int) -> RuntimeError:
    last = ", ".join(f"`{run.envelope.name}`" for run in runs[-5:])
    return RuntimeError(
        f"run_all() ran {limit} jobs and they keep dispatching more (the last ran: {last}): "
        "a job that dispatches itself, or two that dispatch each other? If the test "
        "really needs more, pass run_all(limit=...)"
    )


ASSERTIONS = frozenset(
    name
    for name in vars(FakeAssertions)
    if name.startswith(("assert_", "pushed", "all_pushed", "run_all"))
)
"""The public names of `FakeAssertions`: on a real manager each raises `not_faking()`."""


class FakeQueueManager(FakeAssertions, QueueManager):
    """A `QueueManager` over one `RecordingQueue`, with the assertions above."""

    def __init__(
        self,
        recording: RecordingQueue,
        *,
        registry: JobRegistry | None = None,
        connections: Iterable[str] = (),
        locks: LockManager | None = None,
        default_queues: Sequence[str] = (),
    ) -> None:
        named: dict[str, Queue] = dict.fromkeys(connections, recording)
        super().__init__(
            recording,
            registry=registry,
            connections=named,
            locks=locks,
            default_queues=default_queues,
        )
        self.recording = recording
        """The queue every connection of this manager records into."""

    @property
    def is_faking(self) -> bool:
        return True

    def _recorded_jobs(self) -> list[QueuedJob]:
        return self.recording.pushed

    def _batches(self) -> BatchStore | None:
        return batch_store_of(self.recording)


__all__ = [
    "ASSERTIONS",
    "RUN_LIMIT",
    "FakeAssertions",
    "FakeQueueManager",
    "JobRun",
    "JobType",
    "NotFaking",
    "RecordingQueue",
    "not_faking",
    "run_recorded",
]
