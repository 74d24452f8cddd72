# SPDX-License-Identifier: MIT
"""Huey adapter: Redis, SQLite or MySQL storage, P `huey_consumer <huey> -k MODE -w C` processes.

Huey's consumer runs its C workers as forked processes (`-k process`), as
threads (`-k thread`, the CLI's default) or as greenlets. Its documentation
shows process workers as the way to scale it out (the project's own
example starts its consumer with `-k process -w 4`), and suggests greenlets
for tasks that wait on I/O rather than compute; threads, the default, sit
between the two: they cost no fork and wait without holding the GIL. Process and
thread workers are both run here (`bench/compare/modes.py`: "huey/process"
and "huey/thread", the mode from `MODE_ENV`) and ours is compared with the
faster: short jobs that spend their time in Python are what processes are
for (each has its own interpreter and GIL), while jobs that block on I/O
leave a thread's GIL free and cost no fork. Greenlets would need gevent,
which the peers' venv does not install.

Huey has no bulk enqueue: the task is called once per job. The backend comes
from `RQCOMPARE_BACKEND` (set by bench.compare.run for the adapter and so
for its workers):

- `redis` (the default): `RedisHuey`;
- `sqlite`: `SqliteHuey`, one file per run, Huey's defaults (WAL; SQLite's
  default `synchronous`, FULL);
- `mysql`: `SqlHuey` from `huey.contrib.sql_huey` (peewee and PyMySQL), in a
  database of its own per run (`rqcmp_huey_<tag>`), dropped afterwards,
  since its tables have fixed names (`task`, `kv`, ...).

Huey's SQL storages delete a task as they dequeue it, so a worker that dies
mid-task loses it; ours keeps a lease. The two are not the same guarantee.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from huey import Huey, MemoryHuey, RedisHuey, SqliteHuey

from ..latency_check import record
from ._common import BACKEND_ENV, MYSQL_DSN, REDIS_URL, TAG_ENV, Adapter, bin_of, main, mode
from ._sync import delete_matching, incr_counter

NAME = f"rqcmp-huey-{os.environ.get(TAG_ENV, 'none')}"
BACKEND = os.environ.get(BACKEND_ENV) or "redis"
WORKER_TYPE = mode(("process", "thread"))
"""`-k`: "process" (the documented way to scale out, and the default here) or "thread"."""
SQLITE_FILE = Path(tempfile.gettempdir()) / f"{NAME}.db"
MYSQL_DB = f"rqcmp_huey_{os.environ.get(TAG_ENV, 'none')}"


def _mysql(database: str | None = None) -> object:
    import pymysql

    dsn = urlsplit(MYSQL_DSN)
    return pymysql.connect(
        host=dsn.hostname, port=dsn.port or 3306, user=dsn.username, database=database
    )


def make_huey() -> Huey:
    if BACKEND not in ("redis", "sqlite", "mysql"):
        raise SystemExit(f"huey adapter: no backend {BACKEND!r} here")
    if BACKEND == "redis":
        return RedisHuey(NAME, url=REDIS_URL, results=False)
    if BACKEND == "mysql":
        import pymysql  # noqa: F401  (the import probe checks that both load)
        from huey.contrib.sql_huey import SqlHuey
    if os.environ.get(TAG_ENV, "probe") == "probe":
        # An import probe, or the first pass of `python -m` before the harness has set
        # the run's tag: create no file and no database.
        return MemoryHuey(NAME)
    if BACKEND == "sqlite":
        return SqliteHuey(NAME, filename=str(SQLITE_FILE), results=False)
    conn = _mysql()  # the database must exist before SqlHuey creates its tables
    with conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{MYSQL_DB}`")
    conn.close()  # type: ignore[attr-defined]
    url = f"mysql://{urlsplit(MYSQL_DSN).netloc}/{MYSQL_DB}"
    return SqlHuey(NAME, database=url, results=False)


huey = make_huey()


@huey.task(name="compare_incr")
def compare_incr(n: int) -> None:
    incr_counter()


@huey.task(name="compare_latency")
def compare_latency(seq: int, pushed_at: float) -> None:
    record(seq, pushed_at)


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
            WORKER_TYPE,
            "--workers",
            str(self.concurrency),
            "--quiet",
        ]
        if BACKEND != "redis":
            # Huey polls SQL storage, backing off up to 10 s when idle; cap it at 1 s,
            # the same cap as ours (`--sleep 1s`). RedisHuey blocks on Redis instead.
            command += ["--max-delay", "1"]
        return [command] * self.processes

    def push_one(self, seq: int, pushed_at: float) -> None:
        compare_latency(seq, pushed_at)

    def teardown(self) -> None:
        if BACKEND == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{SQLITE_FILE}{suffix}").unlink()
        elif BACKEND == "mysql":
            huey.storage.close()
            conn = _mysql()
            with conn.cursor() as cur:  # type: ignore[attr-defined]
                cur.execute(f"DROP DATABASE IF EXISTS `{MYSQL_DB}`")
            conn.close()  # type: ignore[attr-defined]
        else:
            delete_matching(f"*{NAME.replace('-', '')}*")  # huey drops the dashes


if __name__ == "__main__":
    main(HueyAdapter)
