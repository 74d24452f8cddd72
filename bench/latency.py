# SPDX-License-Identifier: MIT
"""Push-to-start latency: how long an idle worker takes to start a job just pushed.

For each driver URL, one worker runs in its own process through the CLI
(`python -m rainier_queue ... work --concurrency 4 --sleep 1s`, or the
`--concurrency` given), the way it
is deployed. This process then pushes jobs one at a time at a fixed rate;
each job carries `time.time()` from just before its push (`pushed_at`) and
its handler appends that, next to `time.time()` at its own start, to a
results file. Both processes share a clock, so the difference is the
latency. The worker is stopped with SIGTERM and a table of percentiles is
printed per driver.

    .venv/bin/python -m bench.latency
    .venv/bin/python -m bench.latency --rate 50 --samples 300 --json
    .venv/bin/python -m bench.latency --url 'redis://127.0.0.1:6379/0?prefix=mine:'

`memory://` lives inside one process, so its worker runs in this process
instead (same options). A driver whose service cannot be reached is
skipped with a note. The default server URLs use a random table/key
prefix, dropped again afterwards; a `--url` given by hand is left alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from rainier_queue import QueuedJob, Worker, WorkerOptions
from rainier_queue.connections import open_queue
from rainier_queue.drivers import scheme_of
from rainier_queue.queue import Provisionable, Queue
from rainier_queue.redact import redact_url

from .latency_jobs import JOB_NAME, OUT_ENV, registry

ROOT = Path(__file__).resolve().parents[1]
APP = "bench.latency_jobs:registry"
CONCURRENCY = 4
SLEEP = timedelta(seconds=1)
PROBE_TIMEOUT = 10.0
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 40.0


class Skipped(Exception):
    """The driver cannot be measured here (its service is down, a client is missing)."""


@dataclass(slots=True)
class Result:
    driver: str
    url: str
    latencies_ms: list[float] = field(default_factory=list)
    expected: int = 0
    skipped: str | None = None

    def summary(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"driver": self.driver, "url": self.url, "skipped": self.skipped}
        values = sorted(self.latencies_ms)
        return {
            "driver": self.driver,
            "url": self.url,
            "samples": len(values),
            "expected": self.expected,
            "p50_ms": round(percentile(values, 50), 3),
            "p90_ms": round(percentile(values, 90), 3),
            "p99_ms": round(percentile(values, 99), 3),
            "max_ms": round(values[-1], 3) if values else math.nan,
        }


def percentile(ordered: Sequence[float], pct: float) -> float:
    """The `pct` percentile of sorted values, interpolating between neighbours."""
    if not ordered:
        return math.nan
    rank = (len(ordered) - 1) * pct / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def default_urls(tmp: Path) -> list[str]:
    tag = secrets.token_hex(4)
    return [
        "memory://",
        f"sqlite:///{tmp / 'latency.db'}",
        f"postgresql://postgres@127.0.0.1:5432/test?prefix=rqbench_{tag}_",
        f"mysql://root@127.0.0.1:3306/test?prefix=rqbench_{tag}_",
        f"redis://127.0.0.1:6379/0?prefix=rqbench:{tag}:",
    ]


def read_samples(path: Path) -> dict[int, float]:
    """seq -> latency in ms, from the results file (first line per seq wins)."""
    found: dict[int, float] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue  # a line still being written
            seq, pushed, started = int(parts[0]), float(parts[1]), float(parts[2])
            found.setdefault(seq, (started - pushed) * 1000)
    return found


def envelope(seq: int) -> QueuedJob:
    return QueuedJob.create(JOB_NAME, {"seq": seq, "pushed_at": time.time()}, max_attempts=1)


async def probe(url: str) -> None:
    """Reach the driver's service once (this also creates the tables, and provisions the
    queue where the driver asks for that, as NATS does); `Skipped` if not."""
    try:
        queue = open_queue(url)
    except Exception as exc:
        raise Skipped(f"{type(exc).__name__}: {exc}") from exc
    try:
        if isinstance(queue, Provisionable):
            await asyncio.wait_for(queue.provision(["default"]), PROBE_TIMEOUT)
        await asyncio.wait_for(queue.size("default"), PROBE_TIMEOUT)
    except Exception as exc:
        raise Skipped(f"not reachable ({type(exc).__name__}: {exc})") from exc
    finally:
        with contextlib.suppress(Exception):
            await queue.aclose()


async def wait_for(
    path: Path, want: set[int], timeout: float, alive: asyncio.Future[Any] | None
) -> dict[int, float]:
    """Poll the results file until every seq in `want` is there, or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        found = read_samples(path)
        if want <= found.keys() or time.monotonic() > deadline:
            return found
        if alive is not None and alive.done():
            raise RuntimeError("the worker stopped before the benchmark was done")
        await asyncio.sleep(0.02)


async def pace(queue: Queue, path: Path, rate: float, samples: int) -> None:
    """Warm up with one job, then push `samples` jobs one at a time, `rate` per second."""
    loop = asyncio.get_running_loop()
    await queue.push(envelope(-1))
    found = await wait_for(path, {-1}, READY_TIMEOUT, None)
    if -1 not in found:
        raise RuntimeError(f"the worker did not start a job within {READY_TIMEOUT:.0f}s")
    await asyncio.sleep(0.5)  # let it settle back into its idle wait
    start = loop.time()
    for seq in range(samples):
        delay = start + seq / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await queue.push(envelope(seq))


async def measure_in_process(
    url: str, path: Path, rate: float, samples: int, *, concurrency: int = CONCURRENCY
) -> dict[int, float]:
    queue = open_queue(url)
    worker = Worker(queue, registry, WorkerOptions(concurrency=concurrency, sleep=SLEEP))
    running = asyncio.ensure_future(worker.run())
    try:
        await pace(queue, path, rate, samples)
        return await wait_for(path, set(range(samples)), samples / rate + 30, running)
    finally:
        worker.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, STOP_TIMEOUT)
        await queue.aclose()


async def measure_cli(
    url: str, path: Path, rate: float, samples: int, *, concurrency: int = CONCURRENCY
) -> dict[int, float]:
    command = [
        *("-m", "rainier_queue", "--app", APP, "--url", url, "--quiet", "work"),
        *("--concurrency", str(concurrency), "--sleep", f"{SLEEP.total_seconds():g}s"),
    ]
    env = {**os.environ, OUT_ENV: str(path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *command, cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL
    )
    exited = asyncio.ensure_future(proc.wait())
    queue = open_queue(url)
    try:
        await pace(queue, path, rate, samples)
        return await wait_for(path, set(range(samples)), samples / rate + 30, exited)
    finally:
        await queue.aclose()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(exited), STOP_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await exited


async def cleanup(url: str) -> None:
    """Drop the prefixed tables (postgres, mysql), delete the prefixed keys (redis), the
    prefix's streams (nats) or its queues (rabbitmq)."""
    parts = urlsplit(url)
    prefix = parse_qs(parts.query).get("prefix", [""])[0]
    if not prefix:
        return
    scheme = scheme_of(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    if scheme in ("postgresql", "postgres"):
        await _drop_postgres(base, prefix)
    elif scheme in ("mysql", "mariadb"):
        await asyncio.to_thread(_drop_mysql, parts, prefix)
    elif scheme in ("redis", "rediss"):
        await _delete_redis(base, prefix)
    elif scheme == "nats":
        await _delete_nats(base, prefix)
    elif scheme in ("amqp", "amqps"):
        await _delete_amqp(url)


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"


async def _drop_postgres(base: str, prefix: str) -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
        rows = await (
            await conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename LIKE %s",
                (_like(prefix),),
            )
        ).fetchall()
        for (name,) in rows:
            await conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(name))
            )


def _drop_mysql(parts: Any, prefix: str) -> None:
    import pymysql  # type: ignore[import-untyped]

    conn = pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.path.lstrip("/") or None,
        autocommit=True,
    )
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name LIKE %s",
                (_like(prefix),),
            )
            for (name,) in cur.fetchall():
                cur.execute(f"DROP TABLE IF EXISTS `{name.replace('`', '``')}`")
    finally:
        conn.close()


async def _delete_nats(base: str, prefix: str) -> None:
    import nats
    import nats.js.errors

    from rainier_queue.drivers.nats.names import Names

    client = await nats.connect(base)
    try:
        names = Names(prefix)
        for stream in (names.stream, names.failed_stream):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await client.jetstream().delete_stream(stream)
    finally:
        await client.close()


async def _delete_amqp(url: str) -> None:
    """Delete the queues `provision` declared for the queue `default`, and the failed queue."""
    import aio_pika

    from rainier_queue.drivers.rabbitmq import RabbitMQQueue
    from rainier_queue.drivers.rabbitmq.names import failed_exchange, failed_queue

    queue = open_queue(url)
    assert isinstance(queue, RabbitMQQueue)
    settings = queue.settings
    await queue.aclose()
    names = [name for _, name, _ in queue._topology.wanted(["default"])]
    connection = await aio_pika.connect(
        host=settings.host,
        port=settings.port,
        login=settings.username,
        password=settings.password,
        virtualhost=settings.vhost,
    )
    try:
        channel = await (await connection.channel()).get_underlay_channel()
        for name in [*names, failed_queue(settings.prefix)]:
            await channel.queue_delete(name)
        await channel.exchange_delete(failed_exchange(settings.prefix))
    finally:
        await connection.close()


async def _delete_redis(base: str, prefix: str) -> None:
    import redis.asyncio as redis

    client = redis.Redis.from_url(base)
    try:
        pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix) + "*"
        batch: list[bytes] = []
        async for key in client.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                await client.delete(*batch)
                batch.clear()
        if batch:
            await client.delete(*batch)
    finally:
        await client.aclose()


async def run_one(
    url: str, rate: float, samples: int, clean: bool, *, concurrency: int = CONCURRENCY
) -> Result:
    scheme = scheme_of(url)
    in_process = scheme == "memory"
    result = Result(
        driver=f"{scheme} ({'in-process' if in_process else 'CLI worker'})",
        url=redact_url(url),
        expected=samples,
    )
    try:
        if not in_process:
            await probe(url)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "samples.txt"
            os.environ[OUT_ENV] = str(path)  # for the in-process worker
            measure = measure_in_process if in_process else measure_cli
            found = await measure(url, path, rate, samples, concurrency=concurrency)
        result.latencies_ms = [ms for seq, ms in found.items() if seq >= 0]
    except Skipped as exc:
        result.skipped = str(exc)
    except Exception as exc:
        result.skipped = f"failed: {type(exc).__name__}: {exc}"
    finally:
        if clean:
            try:
                await cleanup(url)
            except Exception as exc:
                print(f"note: could not clean up {redact_url(url)}: {exc}", file=sys.stderr)
    return result


def render(results: list[Result], rate: float, samples: int, concurrency: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"push-to-start latency, {samples} jobs at {rate:g}/s, "
        f"concurrency {concurrency}, sleep {SLEEP.total_seconds():g}s (ms)"
    )
    table.add_column("driver")
    for name in ("samples", "p50", "p90", "p99", "max"):
        table.add_column(name, justify="right")
    notes: list[str] = []
    for result in results:
        row = result.summary()
        if result.skipped is not None:
            table.add_row(result.driver, "skipped", "", "", "", "")
            notes.append(f"{result.driver}: {result.skipped}")
            continue
        count = f"{row['samples']}/{row['expected']}"
        table.add_row(
            result.driver,
            count,
            *(f"{row[key]:.2f}" for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms")),
        )
    console = Console()
    console.print(table)
    for note in notes:
        console.print(f"[yellow]skipped[/yellow] {note}", highlight=False)


async def run_all(urls: list[str], args: argparse.Namespace, clean: bool) -> list[Result]:
    results: list[Result] = []
    for url in urls:
        result = await run_one(url, args.rate, args.samples, clean, concurrency=args.concurrency)
        if args.json:
            print(json.dumps(result.summary()), flush=True)
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="jobs pushed per second [50]")
    parser.add_argument("--samples", type=int, default=300, help="jobs measured per driver [300]")
    parser.add_argument(
        "--url",
        action="append",
        help="measure this queue (repeatable) instead of the default five; not cleaned up",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=CONCURRENCY,
        help=f"the worker's --concurrency [{CONCURRENCY}]",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line per driver")
    args = parser.parse_args()
    if args.rate <= 0 or args.samples < 1 or args.concurrency < 1:
        parser.error("--rate must be positive, --samples and --concurrency at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        urls = args.url or default_urls(Path(tmp))
        results = asyncio.run(run_all(urls, args, clean=not args.url))
    if not args.json:
        render(results, args.rate, args.samples, args.concurrency)


if __name__ == "__main__":
    main()
