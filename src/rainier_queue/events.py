# SPDX-License-Identifier: MIT
"""What the worker reports as it goes: plain event values and a quiet dispatcher.

Listeners (metrics, logging, a dashboard feed) must never change a job's
outcome, so they are called "quietly": every listener runs, a listener that
raises is logged and counted, and the job carries on as if nothing happened.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from .envelope import QueuedJob

log = logging.getLogger("rainier_queue.events")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobProcessing:
    """An attempt is about to run."""

    job: QueuedJob


@dataclass(frozen=True, slots=True, kw_only=True)
class JobProcessed:
    """An attempt succeeded and was acknowledged."""

    job: QueuedJob
    duration: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class JobReleased:
    """An attempt failed and the job will be tried again after `delay`."""

    job: QueuedJob
    delay: timedelta
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFailed:
    """The job went to the failed store."""

    job: QueuedJob
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCancelled:
    """The job was cancelled (`QueueManager.cancel`) before or while it ran, and acknowledged:
    neither failed nor to be retried."""

    job: QueuedJob
    while_running: bool
    """True if its handler had started (and was asked to stop); False if it never ran."""


Event = JobProcessing | JobProcessed | JobReleased | JobFailed | JobCancelled
Listener = Callable[[Event], Awaitable[None] | None]


class EventDispatcher:
    """Calls every listener for every event; a listener's failure touches nothing else."""

    def __init__(self, listeners: list[Listener] | None = None) -> None:
        self._listeners: list[Listener] = list(listeners or [])
        self.listener_failures = 0
        """How many times a listener raised. For tests and `stats`."""

    def listen(self, listener: Listener) -> Listener:
        """Add a listener (usable as a decorator)."""
        self._listeners.append(listener)
        return listener

    async def emit(self, event: Event) -> None:
        """Deliver `event` to every listener, quietly."""
        for listener in self._listeners:
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self.listener_failures += 1
                log.exception("event listener %r failed on %s", listener, type(event).__name__)

    def __bool__(self) -> bool:
        return bool(self._listeners)
