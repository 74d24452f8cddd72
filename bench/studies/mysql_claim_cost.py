# SPDX-License-Identifier: MIT
"""Whether a MySQL/MariaDB claim gets dearer as a long drain goes on.

InnoDB leaves a deleted row's record (delete-marked) in every index until its
purge thread removes it, so a claim that scans the queue's index from the
head could step over more and more of them as a drain advances, the way a
PostgreSQL claim steps over dead index entries until VACUUM. Whether it does
depends on purge keeping up, which a jobs/s figure on a shared machine
cannot show. This pushes N no-op jobs, drains them with CLI workers, and at
5% and 90% done runs the claim's `SELECT ... FOR UPDATE SKIP LOCKED` and an
acknowledging `DELETE` in a session of its own (rolled back), reading the
session's `Handler_read_*` counters around each: the index entries and rows
the server stepped through for it. It also prints the purge backlog
(`Innodb_history_list_length` / "History list length").

    .venv/bin/python -m bench.studies.mysql_claim_cost --jobs 200000
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path

import pymysql

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue
from rainier_queue.drivers.database.mysql.connection import NOW_US

from ..noop_jobs import start_drainers

ROOT = Path(__file__).resolve().parents[2]
PROBES = (0.05, 0.50, 0.90)


async def push(url: str, count: int, batch: int = 5000) -> None:
    queue = open_queue(url)
    try:
        await queue.size("default")
        for i in range(0, count, batch):
            jobs = [
                QueuedJob.create("bench-noop", {"n": n}, max_attempts=1)
                for n in range(i, min(count, i + batch))
            ]
            await queue.push_many(jobs)
    finally:
        await queue.aclose()


def handler(conn: pymysql.connections.Connection) -> dict[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%'")
        return {str(k): int(v) for k, v in cur.fetchall()}


def delta(before: dict[str, int], after: dict[str, int]) -> str:
    # The SHOW STATUS itself counts a few reads; it is the same on both sides.
    parts = [
        f"{k.removeprefix('Handler_read_')}={after[k] - before[k]}"
        for k in sorted(after)
        if after[k] - before[k]
    ]
    return " ".join(parts)


def probe(conn: pymysql.connections.Connection, table: str, share: float, limit: int) -> str:
    lines = [f"at {share:.0%} done:"]
    with conn.cursor() as cur:
        cur.execute("SHOW ENGINE INNODB STATUS")
        status = str(cur.fetchone()[2])
        history = next((ln for ln in status.splitlines() if "History list length" in ln), "?")
        lines.append(f"  purge backlog: {history.strip()}")
        conn.begin()
        try:
            before = handler(conn)
            cur.execute(
                f"SELECT seq, id FROM {table} WHERE queue = 'default' AND due_at <= {NOW_US} "
                f"AND (lease_until IS NULL OR lease_until <= {NOW_US}) "
                "ORDER BY due_at, seq LIMIT %s FOR UPDATE SKIP LOCKED",
                (limit,),
            )
            rows = cur.fetchall()
            after = handler(conn)
            lines.append(f"  claim of {len(rows)}: {delta(before, after)}")
            if rows:
                before = handler(conn)
                marks = ", ".join(["%s"] * len(rows))
                cur.execute(f"DELETE FROM {table} WHERE id IN ({marks})", [r[1] for r in rows])
                after = handler(conn)
                lines.append(f"  delete of {len(rows)}: {delta(before, after)}")
        finally:
            conn.rollback()
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--prefix", default="pgbacklog_my_")
    args = parser.parse_args()
    url = f"mysql://root@127.0.0.1:3306/test?prefix={args.prefix}"
    table = f"{args.prefix}jobs"
    conn = pymysql.connect(host="127.0.0.1", user="root", database="test", autocommit=True)
    try:
        started = time.perf_counter()
        asyncio.run(push(url, args.jobs))
        print(f"pushed {args.jobs:,} in {time.perf_counter() - started:.0f} s", flush=True)
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            total = int(cur.fetchone()[0])
        procs = start_drainers(url, args.concurrency, args.processes)
        out: list[str] = []
        stop = threading.Event()

        def watch() -> None:
            probes = list(PROBES)
            while probes and not stop.wait(0.2):
                with conn.cursor() as cur:
                    cur.execute(f"SELECT MIN(seq) FROM {table}")  # claims go in push order
                    low = cur.fetchone()[0]
                done = total if low is None else int(low) - first_seq
                while probes and done >= probes[0] * total:
                    out.append(probe(conn, table, probes.pop(0), args.concurrency))

        with conn.cursor() as cur:
            cur.execute(f"SELECT MIN(seq) FROM {table}")
            first_seq = int(cur.fetchone()[0])
        thread = threading.Thread(target=watch, daemon=True)
        started = time.perf_counter()
        thread.start()
        codes = [p.wait() for p in procs]
        took = time.perf_counter() - started
        stop.set()
        thread.join()
        print(f"drained in {took:.0f} s; exit codes {codes}")
        print("\n".join(out))
    finally:
        with conn.cursor() as cur:
            for suffix in ("jobs", "failed_jobs", "schema_version"):
                cur.execute(f"DROP TABLE IF EXISTS {args.prefix}{suffix}")
        conn.close()


if __name__ == "__main__":
    main()
