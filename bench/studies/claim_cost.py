# SPDX-License-Identifier: MIT
"""What one job costs the database server and the worker, before and after a change to the claim.

A queue on PostgreSQL shares the server with the application, so the CPU
and WAL the server spends per job matter more than a jobs/s figure on a
busy two-core machine. This drains the same no-op jobs with one CLI worker
from each tree in turn and reads, per job:

- the server's CPU: user + system time of the backends serving this
  benchmark's own database, read from /proc while they live (so another
  database's load on the same server is not counted);
- WAL bytes (`pg_current_wal_lsn()` before and after; this one is the whole
  server's, so other activity shows up as noise, and the median is kept);
- updates, and how many of them were HOT (`pg_stat_user_tables`);
- the worker's own CPU.

Rounds alternate between the trees, so a machine that slows down mid-run
slows both; medians are reported.

    .venv/bin/python -m bench.studies.claim_cost --before ../before --after . \\
        --jobs 20000 --rounds 5
    .venv/bin/python -m bench.studies.claim_cost --before ../before --after . --kind sqlite
    .venv/bin/python -m bench.studies.claim_cost --before ../before --after . --kind mysql

Each tree must be a checkout of this repository; each round's jobs are
pushed by the tree's own code, so its tables are that tree's schema.
`--database` (created if missing) should serve nothing else. On MySQL the
server's CPU is the whole `mariadbd`/`mysqld` process's (anything else it
serves meanwhile counts too), and there is no WAL or HOT figure; SQLite
runs inside the worker, so the worker's CPU is all there is.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg

TICK = os.sysconf("SC_CLK_TCK")

ENQUEUE = """
import asyncio, sys
from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue

async def main(url, count):
    queue = open_queue(url)
    await queue.size("default")
    jobs = [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]
    for i in range(0, count, 1000):
        await queue.push_many(jobs[i : i + 1000])
    await queue.aclose()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


@dataclass
class Round:
    server_us: float
    worker_us: float
    wal_bytes: float
    updates: int
    hot: int


class BackendCpu:
    """Samples the CPU time of every backend of one database until stopped."""

    def __init__(self, admin: str, database: str) -> None:
        self._admin = admin
        self._database = database
        self._seen: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BackendCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self._admin, autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self._database,)
                ).fetchall()
                for (pid,) in rows:
                    ticks = _ticks(pid)
                    if ticks is not None:
                        self._seen[pid] = max(ticks, self._seen.get(pid, 0))
                time.sleep(0.02)

    @property
    def seconds(self) -> float:
        return sum(self._seen.values()) / TICK


def _ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime, stime


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAINIER_QUEUE_")}
    env["PYTHONPATH"] = str(tree / "src")
    return env


def _table_stats(admin_db: str, table: str) -> tuple[int, int, int]:
    with psycopg.connect(admin_db, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd, pg_current_wal_lsn() - '0/0'::pg_lsn "
            "FROM pg_stat_user_tables WHERE relname = %s",
            (table,),
        ).fetchone()
    assert row is not None, table
    return int(row[0]), int(row[1]), int(row[2])


def _process_ticks(names: tuple[str, ...]) -> int:
    total = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm in names:
                total += _ticks(int(entry.name)) or 0
    return total


def other_round(kind: str, tree: Path, folder: Path, jobs: int, concurrency: int) -> Round:
    """A round on SQLite (a fresh file) or MySQL (a fresh prefix in database `test`)."""
    tag = uuid.uuid4().hex[:8]
    if kind == "sqlite":
        url = f"sqlite:///{folder / f'{tag}.db'}"
    else:
        url = f"mysql://root@127.0.0.1:3306/test?prefix=cc{tag}_"
    subprocess.run([sys.executable, "-c", ENQUEUE, url, str(jobs)], env=_env(tree), check=True)
    command = [sys.executable, "-m", "rainier_queue", "--app", "bench.noop_jobs:registry"]
    command += ["--url", url, "work", "--stop-when-empty", "--concurrency", str(concurrency)]
    servers = ("mariadbd", "mysqld")
    server0 = _process_ticks(servers) if kind == "mysql" else 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=tree, env=_env(tree), stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    server = (_process_ticks(servers) - server0) / TICK if kind == "mysql" else 0.0
    if kind == "mysql":
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", user="root", database="test", autocommit=True)
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE cc{tag}_jobs, cc{tag}_failed_jobs, cc{tag}_schema_version")
        conn.close()
    worker = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    per = 1e6 / max(jobs, 1) if jobs else 1e6
    return Round(server * per, worker * per, 0.0, 0, 0)


def one_round(tree: Path, base: str, database: str, jobs: int, concurrency: int) -> Round:
    prefix = f"cc{uuid.uuid4().hex[:8]}_"
    db_url = f"{base}/{database}"
    url = f"{db_url}?prefix={prefix}"
    subprocess.run([sys.executable, "-c", ENQUEUE, url, str(jobs)], env=_env(tree), check=True)
    time.sleep(1.0)  # let the push's backends report their counts
    upd0, hot0, wal0 = _table_stats(db_url, f"{prefix}jobs")
    command = [sys.executable, "-m", "rainier_queue", "--app", "bench.noop_jobs:registry"]
    command += ["--url", url, "work", "--stop-when-empty", "--concurrency", str(concurrency)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with BackendCpu(f"{base}/postgres", database) as cpu:
        subprocess.run(command, cwd=tree, env=_env(tree), stdout=subprocess.DEVNULL, check=True)
        time.sleep(0.3)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(1.0)
    upd1, hot1, wal1 = _table_stats(db_url, f"{prefix}jobs")
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {prefix}jobs, {prefix}failed_jobs, {prefix}schema_version")
    worker = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Round(
        server_us=cpu.seconds / jobs * 1e6,
        worker_us=worker / jobs * 1e6,
        wal_bytes=(wal1 - wal0) / jobs,
        updates=upd1 - upd0,
        hot=hot1 - hot0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="rainier_claim_bench")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--kind", choices=["postgres", "sqlite", "mysql"], default="postgres")
    args = parser.parse_args()
    if args.kind == "postgres":
        with psycopg.connect(f"{args.server}/postgres", autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (args.database,))
            if found.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{args.database}"')
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[Round]] = {name: [] for name in trees}
    folder = Path(tempfile.mkdtemp(prefix="claim-cost-"))
    # The worker's start-up (interpreter, imports, connecting), taken off its per-job CPU:
    # a drain of an empty SQLite queue, once per tree.
    start_up = {
        name: other_round("sqlite", tree, folder, 0, args.concurrency).worker_us
        for name, tree in trees.items()
    }
    for n in range(args.rounds):
        order = list(trees.items()) if n % 2 == 0 else list(reversed(trees.items()))
        for name, tree in order:
            if args.kind == "postgres":
                r = one_round(tree, args.server, args.database, args.jobs, args.concurrency)
            else:
                r = other_round(args.kind, tree, folder, args.jobs, args.concurrency)
            r.worker_us -= start_up[name] / args.jobs
            results[name].append(r)
            print(
                f"round {n} {name:<6} server {r.server_us:6.1f} us/job  worker "
                f"{r.worker_us:6.1f} us/job  WAL {r.wal_bytes:7.0f} B/job  "
                f"HOT {r.hot}/{r.updates}",
                flush=True,
            )
    shutil.rmtree(folder, ignore_errors=True)
    print(
        f"\n{args.kind}: {args.jobs} no-op jobs, concurrency {args.concurrency}, "
        f"medians of {args.rounds}"
    )
    print(f"{'tree':<8}{'server us/job':>15}{'worker us/job':>15}{'WAL B/job':>11}{'HOT %':>8}")
    for name, rounds in results.items():
        hot = statistics.median(r.hot / r.updates * 100 if r.updates else 0 for r in rounds)
        print(
            f"{name:<8}{statistics.median(r.server_us for r in rounds):>15.1f}"
            f"{statistics.median(r.worker_us for r in rounds):>15.1f}"
            f"{statistics.median(r.wal_bytes for r in rounds):>11.0f}{hot:>8.1f}"
        )


if __name__ == "__main__":
    main()
