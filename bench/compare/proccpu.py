# SPDX-License-Identifier: MIT
"""CPU time per job, read from /proc: where a drain's time goes, split between workers and server.

A jobs/s figure on a two-core machine says who finished first, not why. Every
system in a throughput run shares the same cores with its server, so a
system that spends less CPU per job, in its workers and in the server it
drives, drains faster. `CpuWindow` reads the CPU time (user + system) of the
workers (each command's process and its descendants) and of the backend's
server processes when the job counter passes 10% and 90% of N, the same
marks as the steady rate, and reports microseconds per job in between.

What it cannot see: a process that starts and exits between the two marks
(its time is lost, so a forking worker can read low), and, on Redis, the
counter's own INCR, which lands on the same server for every system alike.
Stdlib only, Linux only (elsewhere every figure is None).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .procmem import PROC, descendants

# The server processes of each backend, by their /proc comm name. Redis is the one
# on the benchmark's port; the cluster tests start others on other ports.
SERVERS: dict[str, tuple[tuple[str, ...], str]] = {
    "redis": (("redis-server",), ":6379"),
    "postgres": (("postgres",), ""),
    "mysql": (("mariadbd", "mysqld"), ""),
    "kafka": (("tansu",), ""),
    "nats": (("nats-server",), "\x004222\x00"),  # `-p 4222`: its arguments, NUL-separated
    "rabbitmq": (("beam.smp",), "\x00/var/lib/rabbitmq\x00"),  # the machine's node: its -home
}
MIN_WINDOW = 0.1  # seconds between the marks; /proc counts CPU in ticks of 10 ms
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int, proc: Path = PROC) -> float | None:
    """User plus system CPU of one process (all its threads), or None if it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The name in parentheses may hold spaces; the fields after it are fixed.
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu_seconds(pids: Iterable[int], proc: Path = PROC) -> float:
    """Summed CPU of the given processes and their live descendants."""
    total = 0.0
    for pid in pids:
        for member in descendants(pid, proc):
            total += cpu_seconds(member, proc) or 0.0
    return total


def server_pids(backend: str, proc: Path = PROC) -> list[int]:
    """The live processes of `backend`'s server on this machine; [] for an embedded one."""
    if backend not in SERVERS:
        return []
    names, needle = SERVERS[backend]
    found: list[int] = []
    with contextlib.suppress(OSError):
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if (entry / "comm").read_text().strip() not in names:
                    continue
                if needle and needle not in (entry / "cmdline").read_bytes().decode(
                    errors="replace"
                ):
                    continue
            except OSError:
                continue
            found.append(int(entry.name))
    return found


class CpuWindow:
    """CPU of the workers and of the server between the 10% and 90% marks of the counter."""

    def __init__(
        self,
        workers: list[int],
        backend: str,
        marks: list[int],
        proc: Path = PROC,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workers = workers
        self.backend = backend
        self.marks = marks
        self.proc = proc
        self.clock = clock
        self.readings: list[tuple[float, float, dict[int, float]] | None] = [None, None]

    def _read(self) -> tuple[float, float, dict[int, float]]:
        pids = server_pids(self.backend, self.proc)
        server = {pid: cpu_seconds(pid, self.proc) or 0.0 for pid in pids}
        return self.clock(), tree_cpu_seconds(self.workers, self.proc), server

    def poll(self, count: int) -> None:
        """Call on every look at the counter: reads once as it passes each mark."""
        for i, mark in enumerate(self.marks):
            if self.readings[i] is None and count >= mark:
                self.readings[i] = self._read()

    def summary(self) -> dict[str, Any]:
        """Microseconds of CPU per job in the window, workers and server; None where unknown."""
        low, high = self.readings
        jobs = self.marks[1] - self.marks[0]
        if low is None or high is None or jobs <= 0 or high[0] - low[0] < MIN_WINDOW:
            return {"worker_cpu_us": None, "server_cpu_us": None}
        workers = high[1] - low[1]
        # A server process that was not there at the first mark started inside the window.
        server = sum(t - low[2].get(pid, 0.0) for pid, t in high[2].items())
        return {
            "worker_cpu_us": round(workers / jobs * 1e6, 1),
            "server_cpu_us": round(server / jobs * 1e6, 1) if high[2] else None,
        }
