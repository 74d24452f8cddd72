# SPDX-License-Identifier: MIT
"""Resident memory of a worker, read from /proc, so the memory workload needs no new dependency.

A worker that leaks a little per job looks fine in a five-second benchmark and
falls over after a day. The memory workload runs a long drain through one
worker and samples its resident set size (VmRSS) with `RssSampler`: once
when the first job has run (imports done, connections open), every
`interval` seconds after that, and once when the last job has run. A worker
command may fork (taskiq, SAQ, Dramatiq start a supervisor and children), so
a sample is the sum over the process and all its descendants.

Stdlib only: the harness imports this from both the project's venv and the
peers' venv. Linux only (it reads /proc); elsewhere every sample is None.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PROC = Path("/proc")


def rss_kib(pid: int, proc: Path = PROC) -> int | None:
    """VmRSS of one process in KiB, or None if it is gone (or this is not Linux)."""
    try:
        text = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None  # a zombie has no VmRSS line


def descendants(pid: int, proc: Path = PROC) -> list[int]:
    """`pid` and every live descendant of it (children of every thread, recursively)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.append(current)
        with contextlib.suppress(OSError):
            for task in (proc / str(current) / "task").iterdir():
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in (task / "children").read_text().split())
    return found


def tree_rss_kib(pids: Iterable[int], proc: Path = PROC) -> int | None:
    """Summed VmRSS of the given processes and their descendants; None if none is alive."""
    total = 0
    alive = False
    for pid in pids:
        for member in descendants(pid, proc):
            value = rss_kib(member, proc)
            if value is not None:
                total += value
                alive = True
    return total if alive else None


class RssSampler:
    """Samples the workers' resident memory while the harness watches the job counter."""

    def __init__(self, pids: list[int], interval: float = 0.25, proc: Path = PROC) -> None:
        self.pids = pids
        self.interval = interval
        self.proc = proc
        self.start_kib: int | None = None
        self.end_kib: int | None = None
        self.peak_kib: int | None = None
        self.samples = 0
        self._next = 0.0

    def _take(self) -> int | None:
        value = tree_rss_kib(self.pids, self.proc)
        if value is not None:
            self.samples += 1
            self.peak_kib = value if self.peak_kib is None else max(self.peak_kib, value)
        return value

    def poll(self, count: int) -> None:
        """Call on every look at the counter; samples at most once per `interval`."""
        if count < 1:
            return
        now = time.monotonic()
        if self.start_kib is None:
            self.start_kib = self._take()
            self._next = now + self.interval
        elif now >= self._next:
            self._take()
            self._next = now + self.interval

    def finish(self) -> None:
        """The last sample: call once the counter has reached N, before the workers stop."""
        self.end_kib = self._take()

    def summary(self) -> dict[str, Any]:
        growth = None
        if self.start_kib is not None and self.end_kib is not None:
            growth = self.end_kib - self.start_kib
        return {
            "rss_start_kib": self.start_kib,
            "rss_end_kib": self.end_kib,
            "rss_peak_kib": self.peak_kib,
            "rss_growth_kib": growth,
            "rss_samples": self.samples,
        }
