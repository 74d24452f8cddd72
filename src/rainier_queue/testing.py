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
manager = QueueManager.fake()
await signup(manager, email="a@b.c")
manager.assert_pushed(SendWelcome, times=1, where=lambda job: job.email == "a@b.c")
```

With pytest, the `fake_queue_manager` fixture (this package's pytest
plugin, `rainier_queue.pytest_plugin`) hands each test a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .drivers.recording import RecordingQueue
from .envelope import QueuedJob
from .job import Job, JobFunction
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


class FakeAssertions:
    """The assertion half of a faking `QueueManager`: questions about what was recorded."""

    def _recorded_jobs(self) -> list[QueuedJob] | None:
        """The record to read; None when there is none (the error says why)."""
        raise NotImplementedError

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

    def _summary(self) -> str:
        record = self._record()
        if not record:
            return "nothing"
        return ", ".join(f"`{e.name}` on `{e.queue}`" for e in record)


ASSERTIONS = frozenset(
    name for name in vars(FakeAssertions) if name.startswith(("assert_", "pushed", "all_pushed"))
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
    ) -> None:
        named: dict[str, Queue] = dict.fromkeys(connections, recording)
        super().__init__(recording, registry=registry, connections=named, locks=locks)
        self.recording = recording
        """The queue every connection of this manager records into."""

    @property
    def is_faking(self) -> bool:
        return True

    def _recorded_jobs(self) -> list[QueuedJob]:
        return self.recording.pushed


__all__ = [
    "ASSERTIONS",
    "FakeAssertions",
    "FakeQueueManager",
    "JobType",
    "NotFaking",
    "RecordingQueue",
    "not_faking",
]
