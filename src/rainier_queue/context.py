# SPDX-License-Identifier: MIT
"""`JobContext`: what a running job may know about its own run.

A handler needs to know which attempt this is (to act differently on the
last one), and it needs the application's shared objects (a database pool,
an HTTP client) without importing globals. Both come in the context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from .batch_counts import BatchCounts, read_counts

T = TypeVar("T")


class Dependencies:
    """Application objects a handler may ask for by type (or by a string key).

    Built once by the application and handed to the worker, which gives it
    to every job's context. Keeps handlers free of module-level globals.
    """

    def __init__(self, objects: Iterable[object] = (), **named: object) -> None:
        self._by_key: dict[object, object] = {type(o): o for o in objects}
        self._by_key.update(named)

    def provide(self, value: object, *, as_: object | None = None) -> None:
        """Make `value` resolvable by its type, or by `as_` when given."""
        self._by_key[as_ if as_ is not None else type(value)] = value

    def resolve(self, key: type[T]) -> T:
        """The object registered for `key`, or a `LookupError` saying what is there."""
        try:
            return cast(T, self._by_key[key])
        except KeyError:
            for value in self._by_key.values():
                if isinstance(value, key):
                    return value
            known = ", ".join(sorted(_label(k) for k in self._by_key)) or "nothing"
            raise LookupError(
                f"no dependency is registered for {_label(key)}; the worker was given: {known}"
            ) from None

    def get(self, key: str, default: Any = None) -> Any:
        """A dependency registered under a string key."""
        return self._by_key.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key


def _label(key: object) -> str:
    return key.__name__ if isinstance(key, type) else repr(key)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """One attempt of one job, as the handler sees it."""

    job_id: str
    name: str
    queue: str
    attempt: int
    """1 on the first delivery; counts deliveries, including to workers that died."""
    max_attempts: int
    """The attempts this job may use, after the worker's `tries` floor."""
    headers: Mapping[str, str] = field(default_factory=dict)
    dependencies: Dependencies = field(default_factory=Dependencies)
    asked_to_stop: Callable[[], bool] | None = field(default=None, repr=False, compare=False)
    """Set by the worker: whether someone cancelled this job while it runs."""

    @property
    def cancelled(self) -> bool:
        """Whether this job was cancelled (`QueueManager.cancel`) while it runs.

        A plain `def` handler polls this (or `cancel_requested()`) and returns
        early: Python cannot stop a thread from outside, so a handler that never
        looks runs to its end, and the job still ends as cancelled. An `async
        def` handler gets `asyncio.CancelledError` instead, and sees this too.
        """
        asked = self.asked_to_stop
        return asked is not None and asked()

    def cancel_requested(self) -> bool:
        """The same as `cancelled`, as a call."""
        return self.cancelled

    @property
    def batch(self) -> BatchCounts | None:
        """How the batch ended, for a batch's callback (`then`, `catch`, `finally_`): its
        id and how many of its jobs succeeded, failed and were cancelled. None for any
        other job (docs/workflows.md)."""
        return read_counts(self.headers)

    @property
    def is_last_attempt(self) -> bool:
        """Whether a failure now sends the job to the failed store."""
        return self.attempt >= self.max_attempts

    def resolve(self, key: type[T]) -> T:
        """An application dependency by type (see `Dependencies`)."""
        return self.dependencies.resolve(key)

    def __repr__(self) -> str:
        where = f"{self.name} {self.job_id} on {self.queue}"
        return f"JobContext({where}, attempt {self.attempt}/{self.max_attempts})"
