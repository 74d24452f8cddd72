# SPDX-License-Identifier: MIT
"""Stopping one running handler: at a worker's shutdown, or when its job is cancelled.

Why a module of its own: a slot (`slots.py`) holds one for its job from the
moment it is reserved, and the runner (`runner.py`) attaches the task that
runs the handler to it; neither owns the other, and both read the same
few flags.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Interruptible:
    """Lets the worker stop one running handler at shutdown.

    While a handler runs, the task running it is attached here; `interrupt`
    cancels that task then, and only then, so a stop that comes while the
    job is being settled does not cut the settle short.
    """

    # Class-level defaults, not set in an `__init__`: one is made for every job, and
    # most are never interrupted, cancelled or even attached to a task.
    _interrupted = False
    _task: asyncio.Task[Any] | None = None
    _async = False
    cancelled = False
    """Whether `interrupt` cancelled the handler's task (once at most)."""
    stop_asked = False
    """Whether the job was cancelled (`cancel_job`): it ends as cancelled."""
    stop_cancels = 0
    """How often `cancel_job` cancelled the handler's task (once at most)."""

    def asked_to_stop(self) -> bool:
        """Whether the job was cancelled; what `JobContext.cancelled` reads."""
        return self.stop_asked

    def cancel_job(self) -> None:
        """The job was cancelled: an `async def` handler's task is cancelled; a plain `def`
        handler's thread cannot be, and sees `ctx.cancelled` turn true instead."""
        if self.stop_asked:
            return
        self.stop_asked = True
        if self._task is not None and self._async:
            self.stop_cancels += 1
            self._task.cancel()

    def is_interrupted(self) -> bool:
        """Whether the worker asked this job to stop."""
        return self._interrupted

    def interrupt(self) -> None:
        """Cancel the handler (or keep it from starting)."""
        if self._interrupted:
            return
        self._interrupted = True
        if self._task is not None:
            self.cancelled = True
            self._task.cancel()

    def attach(self, task: asyncio.Task[Any], *, is_async: bool = True) -> None:
        """`task` is about to run the handler (an `async def` one if `is_async`)."""
        self._task = task
        self._async = is_async
        if self._interrupted:
            self.cancelled = True
            task.cancel()

    def detach(self) -> None:
        """The handler is over; an interrupt from now on has nothing to cancel."""
        self._task = None


__all__ = ["Interruptible"]
