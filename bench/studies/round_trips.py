# SPDX-License-Identifier: MIT
"""How many requests the server answers per job: the count behind "what bounds the rate".

On two cores a queue's steady rate is set by CPU per job, and much of a
worker's and a server's CPU goes to requests: parsing, planning, a commit,
a reply. So this counts them, from the server's own statistics, while CLI
workers drain no-op jobs pushed beforehand:

- PostgreSQL: transactions committed (`pg_stat_database.xact_commit`, each
  autocommit statement is one) and, if `pg_stat_statements` is installed,
  statements run;
- MySQL/MariaDB: `Questions` (statements the clients sent) and `Com_commit`
  plus autocommit statements are not separable there, so `Questions` only;
- Redis: `total_commands_processed` (a pipelined or scripted batch counts
  each command; a Lua script counts its calls inside it too).

The numbers include the workers' start-up and idle looks, so drain enough
jobs (20,000 by default) that those are noise. Other clients of the same
server are counted too: run it on a quiet server.

    .venv/bin/python -m bench.studies.round_trips --url postgresql://postgres@127.0.0.1/test
    .venv/bin/python -m bench.studies.round_trips --url redis://127.0.0.1:6379/0 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from rainier_queue import QueuedJob
from rainier_queue.connections import open_queue
from rainier_queue.schemes import scheme_of

from ..latency import cleanup
from ..noop_jobs import start_drainers

ROOT = Path(__file__).resolve().parents[2]
BATCH = 1000


def with_prefix(url: str) -> str:
    """`url` with a fresh table or key prefix, unless it names one."""
    parts = urlsplit(url)
    if "prefix" in parse_qs(parts.query):
        return url
    scheme = scheme_of(url)
    prefix = (
        f"rqrt:{secrets.token_hex(4)}:"
        if scheme.startswith("redis")
        else (f"rqrt_{secrets.token_hex(4)}_")
    )
    query = f"{parts.query}&prefix={prefix}" if parts.query else f"prefix={prefix}"
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


async def counters(url: str) -> dict[str, int]:
    """The server's request counters now."""
    scheme = scheme_of(url)
    base = urlunsplit((*urlsplit(url)[:3], "", ""))
    if scheme in ("postgresql", "postgres"):
        import psycopg

        async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            )
            row = await cur.fetchone()
            out = {"transactions": int(row[0]) if row else 0}
            try:
                cur = await conn.execute("SELECT sum(calls) FROM pg_stat_statements")
                row = await cur.fetchone()
                if row and row[0] is not None:
                    out["statements"] = int(row[0])
            except psycopg.Error:
                pass
            return out
    if scheme in ("mysql", "mariadb"):
        import aiomysql  # type: ignore[import-untyped]

        parts = urlsplit(url)
        conn = await aiomysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
            db=parts.path.strip("/") or None,
        )
        try:
            async with conn.cursor() as cur:
                await cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
                (_, value) = await cur.fetchone()
                return {"statements": int(value)}
        finally:
            conn.close()
    if scheme in ("redis", "rediss"):
        from redis.asyncio import Redis

        client = Redis.from_url(base)
        try:
            info = await client.info("stats")
            return {"commands": int(info["total_commands_processed"])}
        finally:
            await client.aclose()
    raise SystemExit(f"round_trips: no request counters for {scheme}:// (a server is needed)")


async def push(url: str, jobs: int) -> None:
    queue = open_queue(url)
    try:
        for start in range(0, jobs, BATCH):
            batch = [
                QueuedJob.create("bench-noop", {"n": n}, max_attempts=1)
                for n in range(start, min(jobs, start + BATCH))
            ]
            await queue.push_many(batch)
    finally:
        await queue.aclose()


def drain(url: str, processes: int, concurrency: int) -> float:
    started = time.perf_counter()
    procs = start_drainers(url, concurrency, processes, quiet=True)
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(f"round_trips: a worker exited {codes}")
    return time.perf_counter() - started


async def measure(url: str, jobs: int, processes: int, concurrency: int) -> dict[str, float]:
    url = with_prefix(url)
    try:
        await push(url, jobs)
        before = await counters(url)
        seconds = await asyncio.to_thread(drain, url, processes, concurrency)
        after = await counters(url)
    finally:
        await cleanup(url)
    out = {f"{k}_per_job": round((after[k] - before[k]) / jobs, 2) for k in before}
    out["jobs_s"] = round(jobs / seconds, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    for url in args.url:
        result = asyncio.run(measure(url, args.jobs, args.processes, args.concurrency))
        shown = ", ".join(f"{k} {v:g}" for k, v in result.items())
        print(
            f"{scheme_of(url)}: {args.jobs:,} jobs, {args.processes} x c{args.concurrency}: {shown}"
        )


if __name__ == "__main__":
    main()
