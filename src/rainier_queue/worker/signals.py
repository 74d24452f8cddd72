# SPDX-License-Identifier: MIT
"""Stopping a worker from the outside: SIGTERM and SIGINT.

A deploy sends SIGTERM and waits; an operator presses Ctrl-C and, if that
is not fast enough, presses it again. So the first signal asks for a
graceful stop (take no new work, let running jobs finish within the grace
period, hand the rest back), and a second one asks for an immediate stop.
The handlers run on the event loop, so they may touch the worker directly.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import timedelta
from typing import Protocol

from ..durations import human_duration

log = logging.getLogger("rainier_queue.worker")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stoppable(Protocol):
    """What a signal handler needs from a worker."""

    @property
    def is_stopping(self) -> bool: ...

    @property
    def grace_period(self) -> timedelta:
        """How long running jobs may take to finish after the first signal."""
        ...

    def stop(self, *, now: bool = False) -> None: ...


def install(worker: Stoppable) -> list[signal.Signals]:
    """Route SIGTERM and SIGINT on the running loop to `worker`; the signals installed.

    Where a handler cannot be installed (not the main thread, no Unix
    signals), say so and carry on: the worker still stops through `stop()`.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "install_signal_handlers() needs the running event loop: call it in the coroutine "
            "that awaits worker.run()"
        ) from None
    installed: list[signal.Signals] = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, _on_signal, worker, sig)
        except (NotImplementedError, RuntimeError, ValueError) as exc:
            log.warning("cannot handle %s here (%s); stop the worker another way", sig.name, exc)
        else:
            installed.append(sig)
    return installed


def uninstall(signals: list[signal.Signals]) -> None:
    """Give `signals` back their default behaviour on the running loop."""
    loop = asyncio.get_running_loop()
    for sig in signals:
        loop.remove_signal_handler(sig)


def _on_signal(worker: Stoppable, sig: signal.Signals) -> None:
    if worker.is_stopping:
        log.warning("received %s again: interrupting running jobs and handing them back", sig.name)
        worker.stop(now=True)
    else:
        # WARNING, not INFO: at the default level the operator must see that the
        # stop has begun, or they press Ctrl-C again and cut the grace period short.
        log.warning(
            "received %s: taking no new jobs, letting running ones finish for up to %s, then "
            "handing back what still runs (send %s again to stop at once: running jobs are "
            "interrupted and handed back, their attempt not counted)",
            sig.name,
            human_duration(worker.grace_period),
            sig.name,
        )
        worker.stop()


__all__ = ["STOP_SIGNALS", "Stoppable", "install", "uninstall"]
