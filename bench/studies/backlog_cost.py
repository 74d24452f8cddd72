# SPDX-License-Identifier: MIT
"""Where a job's cost goes at the start and at the end of a long PostgreSQL drain.

A drain rate read off the wall clock on a shared two-core machine moves with
whatever else runs, so "the last tenth was 0.82x the first" cannot tell a
claim that got dearer from a neighbour that got busier. This pushes N no-op
jobs into a database of its own, drains them with CLI workers, and over the
first tenth (1% to 11% done) and the last (89% to 99%) reads, per job:

- the server's CPU: user + system time, from /proc, of the backends of this
  database (the workers' connections; this script's own are left out);
- the workers' own CPU;
- pages read in the jobs table and in each of its indexes
  (`pg_statio_user_tables` / `pg_statio_user_indexes`: hits plus reads);
- WAL bytes (`pg_current_wal_lsn()`; the whole server's, so others add noise);
- dead rows left in the table (`n_dead_tup`) at each end.

At 5% and 90% it also runs the claim (from the head of the queue and from
just below its first live row, as a worker's floor would) and the
acknowledging DELETE under EXPLAIN (ANALYZE, BUFFERS), in a transaction it
rolls back, and prints the pages each touched.

    .venv/bin/python -m bench.studies.backlog_cost --jobs 1000000
    .venv/bin/python -m bench.studies.backlog_cost --jobs 1000000 --vacuum-every 30

With autovacuum off on the server (as on the benchmark machine), a table
cannot have it on either; `--vacuum-every S` runs a plain `VACUUM` of the
jobs table every S seconds instead, the way autovacuum would on a normal
server. The database (`--database`, created if missing) is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue

from .. import counted_noop as counted
from ..noop_jobs import start_drainers

ROOT = Path(__file__).resolve().parents[2]
TICK = os.sysconf("SC_CLK_TCK")
MARKS = (0.01, 0.05, 0.1, 0.11, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.89, 0.9, 0.99, 1.0)
STEPS = (0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Where the rate and server CPU of each step of the drain (about a tenth) are read."""
PROBES = (0.05, 0.90)


def ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


@dataclass
class Snapshot:
    done: int
    at: float
    server: dict[int, int]
    workers: int
    wal: int
    pages: dict[str, int]
    dead: int


@dataclass
class Watch:
    dsn: str
    table: str
    count: int
    workers: list[int]
    vacuum_every: float
    counts: Path
    server_ticks: dict[int, int] = field(default_factory=dict)
    snaps: dict[float, Snapshot] = field(default_factory=dict)
    probes: list[str] = field(default_factory=list)
    vacuums: int = 0

    def run(self, stop: threading.Event) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            mine = {conn.info.backend_pid}
            probe = psycopg.connect(self.dsn, autocommit=False)
            mine.add(probe.info.backend_pid)
            vacuum = psycopg.connect(self.dsn, autocommit=True)
            mine.add(vacuum.info.backend_pid)
            marks = list(MARKS)
            probes = list(PROBES)
            last_vacuum = time.monotonic()
            polls = 0
            while not stop.wait(0.01):
                polls += 1
                if polls % 10 == 0:
                    self._server(conn, mine)
                done = counted.done(self.counts)
                while marks and done >= marks[0] * self.count:
                    self.snaps[marks.pop(0)] = self._snapshot(conn, done)
                while probes and done >= probes[0] * self.count:
                    self.probes.append(self._probe(probe, probes.pop(0)))
                if self.vacuum_every and time.monotonic() - last_vacuum > self.vacuum_every:
                    vacuum.execute(f"VACUUM {self.table}")
                    self.vacuums += 1
                    last_vacuum = time.monotonic()
            probe.close()
            vacuum.close()

    def _server(self, conn: psycopg.Connection[tuple[object, ...]], mine: set[int]) -> None:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchall()
        for (pid,) in rows:
            if pid not in mine:
                now = ticks(int(pid))  # type: ignore[call-overload]
                if now is not None:
                    self.server_ticks[int(pid)] = now  # type: ignore[call-overload]

    def _snapshot(self, conn: psycopg.Connection[tuple[object, ...]], done: int) -> Snapshot:
        self._server(conn, set())
        conn.execute("SELECT pg_stat_clear_snapshot()")
        pages: dict[str, int] = {}
        for name, hit in conn.execute(
            "SELECT 'heap', heap_blks_hit + heap_blks_read FROM pg_statio_user_tables "
            "WHERE relname = %s UNION ALL "
            "SELECT 'heap (missed)', heap_blks_read FROM pg_statio_user_tables "
            "WHERE relname = %s UNION ALL "
            "SELECT indexrelname, idx_blks_hit + idx_blks_read FROM pg_statio_user_indexes "
            "WHERE relname = %s UNION ALL "
            "SELECT indexrelname || ' (missed)', idx_blks_read FROM pg_statio_user_indexes "
            "WHERE relname = %s",
            (self.table, self.table, self.table, self.table),
        ):
            pages[str(name)] = int(hit)  # type: ignore[call-overload]
        row = conn.execute(
            "SELECT n_dead_tup, pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_user_tables "
            "WHERE relname = %s",
            (self.table,),
        ).fetchone()
        assert row is not None
        return Snapshot(
            done=done,
            at=time.perf_counter(),
            server=dict(self.server_ticks),
            workers=sum(ticks(pid) or 0 for pid in self.workers),
            wal=int(row[1]),  # type: ignore[call-overload]
            pages=pages,
            dead=int(row[0]),  # type: ignore[call-overload]
        )

    def _probe(self, conn: psycopg.Connection[tuple[object, ...]], share: float) -> str:
        from rainier_queue.drivers.database.postgres.statements import PgStatements
        from rainier_queue.drivers.database.schema import Tables

        sql = PgStatements.build(Tables.for_prefix(self.table.removesuffix("jobs")))
        lines = [f"at {share:.0%} done:"]
        try:
            head = conn.execute(
                f"SELECT due_at, seq FROM {self.table} WHERE queue = 'default' "
                "ORDER BY due_at, seq LIMIT 1"
            ).fetchone()
            assert head is not None
            below = (int(head[0]), int(head[1]) - 1)  # type: ignore[call-overload]
            for label, floor in (
                ("claim from head", (-(2**63), -(2**63))),
                ("claim from floor", below),
            ):
                plan = conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) " + sql.claim,
                    ("default", *floor, 8, 30_000_000),
                ).fetchall()
                lines.append(f"  {label}: {_buffers(plan)}")
            got = conn.execute(sql.claim, ("default", *below, 8, 30_000_000)).fetchall()
            seqs = [int(r[0]) for r in got]  # type: ignore[call-overload]
            tokens = [str(r[3]) for r in got]
            plan = conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) " + sql.acknowledge_many, (seqs, tokens)
            ).fetchall()
            lines.append(f"  delete of {len(seqs)}: {_buffers(plan)}")
        finally:
            conn.rollback()
        return "\n".join(lines)


def _buffers(plan: list[tuple[object, ...]]) -> str:
    text = [str(r[0]) for r in plan]
    first = next((t for t in text if "Buffers:" in t), "")
    took = next((t for t in text if t.startswith("Execution Time")), "")
    scans = [t.strip() for t in text if "Index Scan" in t or "Index Only" in t]
    return f"{first.strip()}; {took}; {' | '.join(s[:60] for s in scans)}"


def envelopes(start: int, count: int) -> list[QueuedJob]:
    return [
        QueuedJob.create("bench-noop", {"n": n}, max_attempts=1)
        for n in range(start, start + count)
    ]


async def push(url: str, count: int, batch: int = 10_000) -> None:
    queue = open_queue(url)
    try:
        await queue.size("default")
        for i in range(0, count, batch):
            await queue.push_many(envelopes(i, min(batch, count - i)))
    finally:
        await queue.aclose()


def per_job(a: Snapshot, b: Snapshot) -> dict[str, float]:
    n = b.done - a.done
    server = sum(t - a.server.get(pid, 0) for pid, t in b.server.items())
    out = {
        "jobs/s": n / (b.at - a.at),
        "server us/job": server / TICK / n * 1e6,
        "worker us/job": (b.workers - a.workers) / TICK / n * 1e6,
        "WAL B/job": (b.wal - a.wal) / n,
        "dead rows (end)": float(b.dead),
    }
    for name, pages in b.pages.items():
        out[f"pages/job {name}"] = (pages - a.pages.get(name, 0)) / n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="pgbacklog")
    parser.add_argument("--prefix", default="pgbacklog_")
    parser.add_argument("--vacuum-every", type=float, default=0.0, help="s; 0 for never")
    parser.add_argument("--keep", action="store_true", help="leave the database in place")
    args = parser.parse_args()
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", args.database):
        raise SystemExit("--database must be a plain lowercase identifier")
    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {args.database}")
        admin.execute(f"CREATE DATABASE {args.database}")
    dsn = f"{args.server}/{args.database}"
    url = f"{dsn}?prefix={args.prefix}"
    try:
        started = time.perf_counter()
        asyncio.run(push(url, args.jobs))
        print(f"pushed {args.jobs:,} in {time.perf_counter() - started:.0f} s", flush=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"ANALYZE {args.prefix}jobs")
        counts = Path(tempfile.mkdtemp(prefix="backlog-counts-", dir="/dev/shm"))
        os.environ[counted.COUNTS_ENV] = str(counts)
        procs = start_drainers(
            url, args.concurrency, args.processes, app="bench.counted_noop:registry"
        )
        watch = Watch(
            dsn, f"{args.prefix}jobs", args.jobs, [p.pid for p in procs], args.vacuum_every, counts
        )
        stop = threading.Event()
        thread = threading.Thread(target=watch.run, args=(stop,), daemon=True)
        started = time.perf_counter()
        thread.start()
        codes = [p.wait() for p in procs]
        took = time.perf_counter() - started
        stop.set()
        thread.join()
        if any(codes):
            raise SystemExit(f"a worker exited with {codes}")
        print(f"drained in {took:.0f} s ({args.jobs / took:,.0f} jobs/s); vacuums: {watch.vacuums}")
        shutil.rmtree(counts, ignore_errors=True)
        first = per_job(watch.snaps[0.01], watch.snaps[0.11])
        last = per_job(watch.snaps[0.89], watch.snaps[0.99])
        print(f"{'per job':<36}{'1-11%':>12}{'89-99%':>12}{'last/first':>12}")
        for key in first:
            a, b = first[key], last.get(key, float("nan"))
            ratio = b / a if a else float("nan")
            print(f"{key:<36}{a:>12,.2f}{b:>12,.2f}{ratio:>12.2f}")
        print(f"{'step':<12}{'jobs/s':>10}{'server us/job':>15}{'worker us/job':>15}")
        for a, b in itertools.pairwise(STEPS):
            step = per_job(watch.snaps[a], watch.snaps[b])
            print(
                f"{f'{a:.0%}-{b:.0%}':<12}{step['jobs/s']:>10,.0f}"
                f"{step['server us/job']:>15.1f}{step['worker us/job']:>15.1f}"
            )
        for text in watch.probes:
            print(text)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name, size in conn.execute(
                "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
                "WHERE c.relname LIKE %s AND c.relkind IN ('r', 'i') ORDER BY 1",
                (f"{args.prefix}jobs%",),
            ):
                print(f"after the drain: {name} {int(size) / 1e6:.1f} MB")  # type: ignore[call-overload]
    finally:
        if not args.keep:
            with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {args.database} WITH (FORCE)")


if __name__ == "__main__":
    main()
