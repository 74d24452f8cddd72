# SPDX-License-Identifier: MIT
"""The benchmark's job: does nothing, so what is measured is the queue itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rainier_queue import Job, JobContext, JobRegistry


class Noop(Job):
    name = "bench-noop"
    tries = 1
    n: int

    async def handle(self, ctx: JobContext) -> None:
        return None


registry = JobRegistry([Noop])


ROOT = Path(__file__).resolve().parents[1]


def drain_command(
    url: str, concurrency: int, *, quiet: bool = False, app: str = "bench.noop_jobs:registry"
) -> list[str]:
    """One CLI worker that works these jobs (or `app`'s) from `url` until the queue is empty."""
    return [
        *(sys.executable, "-m", "rainier_queue", "--app", app),
        *("--url", url, *(["--quiet"] if quiet else []), "work", "--stop-when-empty"),
        *("--concurrency", str(concurrency)),
    ]


def start_drainers(
    url: str,
    concurrency: int,
    processes: int,
    *,
    quiet: bool = False,
    app: str = "bench.noop_jobs:registry",
) -> list[subprocess.Popen[bytes]]:
    """`processes` of `drain_command`'s workers, started from the repository root."""
    command = drain_command(url, concurrency, quiet=quiet, app=app)
    return [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL) for _ in range(processes)
    ]
