# SPDX-License-Identifier: MIT
"""Watching a worker drain a backlog: the progress bar and the summary line.

`work --stop-when-empty` over a backlog is a batch job with an end, and a
person running one wants to know how far it got and whether it is stuck,
without turning logging up. The bar counts jobs that reached an end
(processed or failed, from the worker's events), against the backlog
measured when the worker started; retries are shown beside it, since a
retried job is not done. The bar is drawn only on a terminal; with
`--progress` where stderr is not one (a pipe, a log file), the same counts
come as a plain line every few seconds instead, since a bar's redraws would
fill a log with terminal codes. The summary line is always printed: it is
what a log file or a CI job keeps. It says "succeeded", not "processed":
failed jobs were processed too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from ..events import Event, EventDispatcher, JobFailed, JobProcessed, JobReleased
from ..worker import WorkerStats

PLAIN_EVERY = 5.0
"""Seconds between progress lines when stderr is not a terminal."""

if TYPE_CHECKING:  # rich is imported only when a bar is drawn
    from rich.console import Console
    from rich.progress import Progress, TaskID


class Tally:
    """Counts the worker's events and moves the bar, if there is one."""

    def __init__(
        self, *, total: int, console: Console | None, lines: Callable[[str], None] | None = None
    ) -> None:
        self.processed = 0
        self.retried = 0
        self.failed = 0
        self.total = total
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        # `lines` takes the plain progress lines instead of the console (JSON logs), never a bar.
        self._lines = lines
        self._plain = total > 0 and (
            lines is not None or (console is not None and not console.is_terminal)
        )
        self._console = console
        self._said_at = time.monotonic()
        if lines is None and console is not None and total > 0 and console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]working[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
            self._task = self._progress.add_task(self._describe(), total=total)

    @property
    def draws(self) -> bool:
        """Whether there is a bar or progress lines (the summary comes from the worker's stats)."""
        return self._progress is not None or self._plain

    def attach(self, events: EventDispatcher) -> None:
        """Listen to `events`."""
        events.listen(self.on_event)

    def on_event(self, event: Event) -> None:
        if isinstance(event, JobProcessed):
            self.processed += 1
        elif isinstance(event, JobFailed):
            self.failed += 1
        elif isinstance(event, JobReleased):
            self.retried += 1
        else:
            return
        done = self.processed + self.failed
        self.total = max(self.total, done)
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, completed=done, total=self.total, description=self._describe()
            )
        elif self._plain and time.monotonic() - self._said_at >= PLAIN_EVERY:
            self._say()

    def _say(self) -> None:
        """One plain progress line, for a log."""
        self._said_at = time.monotonic()
        line = (
            f"progress: {self.processed + self.failed}/{self.total} done "
            f"(succeeded {self.processed}, retried {self.retried}, failed {self.failed})"
        )
        if self._lines is not None:
            self._lines(line)
            return
        assert self._console is not None
        self._console.print(line, markup=False, highlight=False)

    def _describe(self) -> str:
        return f"[green]✓ {self.processed}[/] [yellow]↻ {self.retried}[/] [red]✗ {self.failed}[/]"

    def __enter__(self) -> Tally:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self._plain:
            self._say()


class Clock:
    """Elapsed wall time since it was made."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started


def summary_fields(stats: WorkerStats, elapsed: float) -> dict[str, object]:
    """The summary's counts, as the fields of its JSON line (`--log-format json`)."""
    return {
        "succeeded": stats.processed,
        "retried": stats.released,
        "failed": stats.failed,
        "interrupted": stats.interrupted,
        "returned_unstarted": stats.returned_unstarted,
        "limited": stats.limited,
        "lost_leases": stats.lost_leases,
        "broker_errors": stats.broker_errors,
        "elapsed_seconds": round(elapsed, 3),
    }


def summary(stats: WorkerStats, elapsed: float) -> str:
    """The one line a run ends with: succeeded / retried / failed / elapsed / jobs per second."""
    rate = stats.total / elapsed if elapsed > 0 else 0.0
    line = (
        f"succeeded {stats.processed}, retried {stats.released}, failed {stats.failed} "
        f"in {elapsed:.1f}s ({rate:.1f} jobs/s)"
    )
    extras = [
        f"{count} {label}"
        for count, label in (
            (stats.interrupted, "interrupted and handed back"),
            (stats.returned_unstarted, "handed back before they started"),
            (stats.limited, "set aside over their key's limit"),
            (stats.abandoned, "left to their leases (threads still running)"),
            (stats.lost_leases, "lost to another worker (lease lapsed)"),
            (stats.broker_errors, "broker errors ridden out"),
        )
        if count
    ]
    return line + (f"; {', '.join(extras)}" if extras else "")


__all__ = ["Clock", "Tally", "summary", "summary_fields"]
