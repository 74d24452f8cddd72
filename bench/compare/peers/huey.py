# SPDX-License-Identifier: MIT
"""Huey adapter: `RedisHuey` or `SqliteHuey`, P `huey_consumer <huey> -k thread -w C` processes.

Huey has no bulk enqueue: the task is called once per job. The backend comes
from `RQCOMPARE_BACKEND` (set by bench.compare.run for the adapter and so
for its workers): `redis` (the default) or `sqlite`, one file per run with
Huey's defaults (WAL; SQLite's default `synchronous`, FULL). Huey's SQLite
storage deletes a task as it dequeues it, so a worker that dies mid-task
loses it; ours keeps a lease. The two are not the same guarantee.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

from huey import Huey, RedisHuey, SqliteHuey

from ._common import BACKEND_ENV, REDIS_URL, TAG_ENV, Adapter, bin_of, main
from ._sync import delete_matching, incr_counter

NAME = f"rqcmp-huey-{os.environ.get(TAG_ENV, 'none')}"
BACKEND = os.environ.get(BACKEND_ENV) or "redis"
SQLITE_FILE = Path(tempfile.gettempdir()) / f"{NAME}.db"


def make_huey() -> Huey:
    if BACKEND == "sqlite":
        return SqliteHuey(NAME, filename=str(SQLITE_FILE), results=False)
    if BACKEND == "redis":
        return RedisHuey(NAME, url=REDIS_URL, results=False)
    raise SystemExit(f"huey adapter: no backend {BACKEND!r} here")


huey = make_huey()


@huey.task(name="compare_incr")
def compare_incr(n: int) -> None:
    incr_counter()


class HueyAdapter(Adapter):
    backend = "redis"

    def enqueue(self) -> float:
        started = time.perf_counter()
        for n in range(self.jobs):
            compare_incr(n)
        return time.perf_counter() - started

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("huey_consumer"),
            "bench.compare.peers.huey.huey",
            "--worker-type",
            "thread",
            "--workers",
            str(self.concurrency),
            "--quiet",
        ]
        return [command] * self.processes

    def teardown(self) -> None:
        if BACKEND == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{SQLITE_FILE}{suffix}").unlink()
        else:
            delete_matching(f"*{NAME.replace('-', '')}*")  # huey drops the dashes


if __name__ == "__main__":
    main(HueyAdapter)
