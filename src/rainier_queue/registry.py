# SPDX-License-Identifier: MIT
"""`JobRegistry`: wire names to job classes, on the side that runs them.

A worker only ever sees a name and a JSON payload. The registry is how it
finds the code again, and the one place that says clearly when it cannot:
a name no handler knows, or a payload written by a version of the job whose
fields have since changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import cast

from .envelope import QueuedJob
from .errors import UnknownJob
from .job import Job, JobFunction


class JobRegistry:
    """Maps each job's stable name to its class."""

    def __init__(self, jobs: Iterable[type[Job] | JobFunction[...]] = ()) -> None:
        self._jobs: dict[str, type[Job]] = {}
        for job in jobs:
            self.register(job)

    def register(self, job: type[Job] | JobFunction[...]) -> type[Job]:
        """Add a job class (or `@job` function). A second class under a taken name is refused."""
        job_class = job.job_class if isinstance(job, JobFunction) else job
        candidate = cast(object, job_class)
        if not (isinstance(candidate, type) and issubclass(candidate, Job)):
            raise TypeError(f"register() takes a Job subclass or an @job function, not {job!r}")
        existing = self._jobs.get(job_class.name)
        if existing is not None and existing is not job_class:
            raise ValueError(
                f"two jobs claim the name `{job_class.name}`: {existing.__module__}."
                f"{existing.__qualname__} and {job_class.__module__}.{job_class.__qualname__}; "
                "wire names must be unique"
            )
        self._jobs[job_class.name] = job_class
        return job_class

    def __call__(self, job_class: type[Job]) -> type[Job]:
        """Use the registry as a class decorator: `@registry`."""
        return self.register(job_class)

    def knows(self, name: str) -> bool:
        """Whether a handler is registered under `name`."""
        return name in self._jobs

    def get(self, name: str) -> type[Job]:
        """The class registered under `name`, or `UnknownJob` listing what is known."""
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(name, self._jobs) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._jobs)

    def queues(self) -> list[str]:
        """The queues named by registered jobs' `queue` constants, in registration order."""
        seen: dict[str, None] = {}
        for cls in self._jobs.values():
            if isinstance(cls.queue, str):
                seen.setdefault(cls.queue, None)
        return list(seen)

    def timeout_for(self, name: str) -> timedelta | None:
        """The job's own timeout, if registered and it has one."""
        cls = self._jobs.get(name)
        return cls.timeout_delta() if cls is not None else None

    def longest_timeout(self) -> timedelta | None:
        """The longest per-job timeout among registered jobs (for lease checks)."""
        timeouts = [t for cls in self._jobs.values() if (t := cls.timeout_delta()) is not None]
        return max(timeouts) if timeouts else None

    def build(self, queued: QueuedJob) -> Job:
        """The job instance for an envelope: `UnknownJob` or `PayloadError` when it cannot be."""
        return self.get(queued.name).from_payload(queued.payload)

    def __iter__(self) -> Iterator[type[Job]]:
        return iter(self._jobs.values())

    def __len__(self) -> int:
        return len(self._jobs)

    def __repr__(self) -> str:
        return f"JobRegistry({', '.join(self.names())})"
