# SPDX-License-Identifier: MIT
"""The no-op job, counted as it runs, so a watcher reads progress to the job, not to the second.

PostgreSQL's own counters (`pg_stat_user_tables.n_tup_del`) reach the
statistics views about once a second, so a drain rate read from them over a
seven-second tenth of a drain is off by up to a seventh either way, and so
is anything divided by it (server CPU per job). Here each worker process
counts the jobs it ran into eight bytes of a file of its own under
`$RAINIER_BENCH_COUNTS` (a directory in `/dev/shm`), and `done()` sums them.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from rainier_queue import Job, JobContext, JobRegistry

COUNTS_ENV = "RAINIER_BENCH_COUNTS"
_SLOT = struct.Struct("q")


class _Tally:
    """This process's count, in a file the watcher reads."""

    def __init__(self) -> None:
        self.count = 0
        self._map: mmap.mmap | None = None

    def add(self) -> None:
        if self._map is None:
            path = Path(os.environ[COUNTS_ENV]) / str(os.getpid())
            path.write_bytes(bytes(_SLOT.size))
            with path.open("r+b") as file:
                self._map = mmap.mmap(file.fileno(), _SLOT.size)
        self.count += 1
        _SLOT.pack_into(self._map, 0, self.count)


_tally = _Tally()


class CountedNoop(Job):
    name = "bench-noop"
    tries = 1
    n: int

    async def handle(self, ctx: JobContext) -> None:
        _tally.add()


registry = JobRegistry([CountedNoop])


def done(directory: Path) -> int:
    """Jobs run so far by every worker counting into `directory`."""
    total = 0
    for path in directory.iterdir():
        data = path.read_bytes()
        if len(data) == _SLOT.size:
            total += _SLOT.unpack(data)[0]
    return total
