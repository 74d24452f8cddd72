# SPDX-License-Identifier: MIT
"""The latency benchmark's job: note when it started, next to when it was pushed.

Each run appends one line, `seq pushed_at started_at`, to the file named by
the `RQBENCH_LATENCY_OUT` environment variable. A line this short goes out
in one `write` on a file opened with `O_APPEND`, so lines from concurrent
jobs never interleave, and the benchmark process can read the file while
the worker is still writing to it.
"""

from __future__ import annotations

import os
import time

from rainier_queue import Job, JobContext, JobRegistry

OUT_ENV = "RQBENCH_LATENCY_OUT"
"""The environment variable naming the results file."""

JOB_NAME = "bench-latency"


def record(seq: int, pushed_at: float, started_at: float) -> None:
    """Append one sample to the results file."""
    line = f"{seq} {pushed_at!r} {started_at!r}\n".encode()
    fd = os.open(os.environ[OUT_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class Latency(Job):
    name = JOB_NAME
    tries = 1
    seq: int
    pushed_at: float

    async def handle(self, ctx: JobContext) -> None:
        started_at = time.time()
        record(self.seq, self.pushed_at, started_at)


registry = JobRegistry([Latency])
