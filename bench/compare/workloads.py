# SPDX-License-Identifier: MIT
"""The three workloads of bench.compare: throughput, latency and memory, each a list of rows.

Each takes the parsed command line and a sink for JSON lines, runs its
systems (interleaved rounds for throughput), and returns one row per
system and backend for the tables, the chart and the README block.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import constants, report
from .adapters import available, console, run_adapter
from .constants import FAR, OURS, PEER_RUN_FLOOR_S
from .modes import expand, selected
from .peers._common import AMQP_URL, NATS_URL

# (system, backend, adapter module): ours first on each backend, then the peers; a peer
# with several modes (modes.MODES) becomes one system per mode, "huey/process" and so on.
SYSTEMS: list[tuple[str, str, str]] = expand(
    [
        (OURS, "memory", "bench.compare.ours"),
        (OURS, "sqlite", "bench.compare.ours"),
        ("huey", "sqlite", "bench.compare.peers.huey"),
        (OURS, "postgres", "bench.compare.ours"),
        ("pgqueuer", "postgres", "bench.compare.peers.pgqueuer"),
        ("procrastinate", "postgres", "bench.compare.peers.procrastinate"),
        (OURS, "mysql", "bench.compare.ours"),
        ("huey", "mysql", "bench.compare.peers.huey"),
        (OURS, "redis", "bench.compare.ours"),
        ("taskiq", "redis", "bench.compare.peers.taskiq"),
        ("saq", "redis", "bench.compare.peers.saq"),
        ("dramatiq", "redis", "bench.compare.peers.dramatiq"),
        ("huey", "redis", "bench.compare.peers.huey"),
        ("rq", "redis", "bench.compare.peers.rq"),
        ("celery", "redis", "bench.compare.peers.celery"),
        (OURS, "kafka", "bench.compare.ours_kafka"),
        (OURS, "nats", "bench.compare.ours"),
        ("taskiq", "nats", "bench.compare.peers.taskiq_nats"),
        (OURS, "rabbitmq", "bench.compare.ours"),
        ("celery", "rabbitmq", "bench.compare.peers.celery_rabbitmq"),
        ("dramatiq", "rabbitmq", "bench.compare.peers.dramatiq_rabbitmq"),
        (OURS, "sqs", "bench.compare.ours"),
        ("celery", "sqs", "bench.compare.peers.celery_sqs"),
    ]
)
LATENCY_BACKENDS = ("memory", "sqlite", "postgres", "mysql", "redis", "nats", "rabbitmq")
SQS_REQUESTS = (
    "sqs_requests_per_job",
    "sqs_requests_per_job_enqueue",
    "sqs_requests_per_job_drain",
)
LATENCY_CONCURRENCY = 4  # the same as bench/latency.py gives our worker by default
MEMORY_PEERS = {"huey": ("huey/thread", "redis", "bench.compare.peers.huey")}
"""--memory-peers name: (system, backend, adapter). Huey's thread workers: one process, whose
memory is the worker's own, as ours is (process workers would sum C forked children)."""


@dataclass(slots=True)
class Runs:
    """Every run of one system on one backend in one workload."""

    system: str
    backend: str
    enqueue: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    steady: list[float] = field(default_factory=list)
    first_job: list[float] = field(default_factory=list)
    worker_cpu: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    runs: int = 0
    errors: list[str] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)
    """Upper bounds (jobs/s) of runs stopped by `FAR`: jobs done over the seconds allowed."""
    last: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.runs > 0 and not self.errors and not self.stopped

    @property
    def done(self) -> bool:
        """No more runs: one failed, or one was stopped for being far behind."""
        return bool(self.errors or self.stopped)

    def far_behind(self, ours: Runs | None) -> bool:
        """Whether this peer's rate so far is below ours' over `FAR` (so more rounds are moot)."""
        mine = report.median(ours.e2e) if ours is not None and ours.ok else None
        theirs = report.median(self.e2e) if self.ok else None
        return mine is not None and theirs is not None and theirs * FAR <= mine

    def row(self) -> dict[str, Any]:
        enqueue = report.median(self.enqueue) if self.ok else None
        e2e = report.median(self.e2e) if self.ok else None
        steady = report.median(self.steady) if self.ok else None
        first_job = report.median(self.first_job) if self.ok else None
        worker_cpu = report.median(self.worker_cpu) if self.ok else None
        server_cpu = report.median(self.server_cpu) if self.ok else None
        start = report.median(self.start) if self.ok else None
        end = report.median(self.end) if self.ok else None
        return {
            **self.last,
            "system": self.system,
            "backend": self.backend,
            "ok": self.ok,
            "runs": self.runs,
            "runs_ok": self.runs - len(self.errors),
            "enqueue_jobs_s": round(enqueue, 1) if enqueue is not None else None,
            "e2e_jobs_s": round(e2e, 1) if e2e is not None else None,
            "steady_jobs_s": round(steady, 1) if steady is not None else None,
            "first_job_s": round(first_job, 3) if first_job is not None else None,
            "worker_cpu_us": round(worker_cpu, 1) if worker_cpu is not None else None,
            "server_cpu_us": round(server_cpu, 1) if server_cpu is not None else None,
            "start_jobs_s": round(start, 1) if start is not None else None,
            "end_jobs_s": round(end, 1) if end is not None else None,
            "stopped_below_jobs_s": round(max(self.stopped), 1) if self.stopped else None,
            "errors": self.errors,
        }


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def emit(sink: TextIO, row: dict[str, Any]) -> None:
    sink.write(json.dumps(row) + "\n")
    sink.flush()


def choose(
    args: argparse.Namespace,
    quiet: bool = False,
    pairs: set[tuple[str, str]] | None = None,
) -> list[tuple[str, str, str]]:
    """The (system, backend, adapter) triples to run; `pairs` narrows them further."""
    chosen: list[tuple[str, str, str]] = []
    for system, backend, module in SYSTEMS:
        if args.backend and backend not in args.backend:
            continue
        if pairs is not None and (system, backend) not in pairs:
            continue
        if args.only is not None and system != OURS and not selected(system, args.only):
            continue
        if args.no_peers and system != OURS:
            continue
        why = available(system, backend, module)
        if why:
            if not quiet:
                console.print(f"[yellow]skipping {system} ({backend})[/yellow]: {why}")
            continue
        chosen.append((system, backend, module))
    return chosen


def partitions_of(backend: str) -> dict[str, int]:
    """The topic's partition count, for a backend that is a log: its ceiling on concurrency."""
    return {"partitions": constants.KAFKA_PARTITIONS} if backend == "kafka" else {}


@dataclass(frozen=True, slots=True)
class Setting:
    """One throughput setting: today's configuration, or a cell of the grid."""

    name: str = ""
    jobs: int | None = None
    concurrency: int | None = None
    sleep_ms: float = 0.0
    pairs: set[tuple[str, str]] | None = None
    rounds: int | None = None


def throughput(
    args: argparse.Namespace, sink: TextIO, setting: Setting = Setting()
) -> list[dict[str, Any]]:
    chosen = choose(args, quiet=bool(setting.name), pairs=setting.pairs)
    runs = {(s, b): Runs(s, b) for s, b, _ in chosen}
    jobs = setting.jobs or args.jobs
    concurrency = setting.concurrency or args.concurrency
    rounds = setting.rounds or args.rounds
    common: dict[str, Any] = {"jobs": jobs, "processes": args.processes, "concurrency": concurrency}
    if setting.name:
        common["setting"] = setting.name
    if setting.sleep_ms:
        common["sleep_ms"] = setting.sleep_ms
    label = f"{setting.name}: " if setting.name else ""
    for round_no in range(1, rounds + 1):
        ours_drain: dict[str, float] = {}
        for system, backend, module in chosen:
            entry = runs[system, backend]
            if entry.done:
                continue  # one failed or stopped run ends the pair; another would only take time
            peer = system != OURS
            if peer and round_no > 1 and entry.far_behind(runs.get((OURS, backend))):
                continue
            timeout = args.timeout
            if peer and backend in ours_drain:
                timeout = min(timeout, max(PEER_RUN_FLOOR_S, FAR * ours_drain[backend]))
            console.print(f"{label}throughput round {round_no}/{rounds}: {system} ({backend}) ...")
            processes = 1 if backend == "memory" else args.processes
            result = run_adapter(
                system,
                backend,
                module,
                jobs=jobs,
                processes=processes,
                concurrency=concurrency,
                timeout=timeout,
                sleep_ms=setting.sleep_ms,
            )
            entry.runs += 1
            ok = bool(result.get("ok"))
            if not peer and ok:
                ours_drain[backend] = result["drain_s"]
            row: dict[str, Any] = {
                "type": "run",
                "workload": "throughput",
                "at": now(),
                "round": round_no,
                "system": system,
                "backend": backend,
                **common,
                "processes": processes,
                **partitions_of(backend),
                "ok": ok,
                "counter": result.get("counter"),
                "counter_ok": result.get("counter") == jobs,
            }
            if ok:
                if result.get("enqueue_s"):
                    row["enqueue_jobs_s"] = round(jobs / result["enqueue_s"], 1)
                    entry.enqueue.append(row["enqueue_jobs_s"])
                row["e2e_jobs_s"] = round(jobs / result["drain_s"], 1)
                entry.e2e.append(row["e2e_jobs_s"])
                if result.get("steady_s"):
                    row["steady_jobs_s"] = round(result["steady_jobs"] / result["steady_s"], 1)
                    entry.steady.append(row["steady_jobs_s"])
                for key, into in (
                    ("first_job_s", entry.first_job),
                    ("worker_cpu_us", entry.worker_cpu),
                    ("server_cpu_us", entry.server_cpu),
                    ("start_jobs_s", entry.start),
                    ("end_jobs_s", entry.end),
                ):
                    if result.get(key) is not None:
                        row[key] = result[key]
                        into.append(result[key])
                for key in ("table_bytes", "index_bytes", "dead_rows", "hot_update_share"):
                    if key in result:
                        row[key] = entry.last[key] = result[key]
                if "file_bytes" in result:
                    row["file_bytes"] = entry.last["file_bytes"] = result["file_bytes"]
                for key in SQS_REQUESTS:  # the SQS row: requests a job, what SQS bills
                    if key in result:
                        row[key] = entry.last[key] = result[key]
                if "sqs_requests_per_job" in result:
                    console.print(
                        f"{system} (sqs): {result['sqs_requests_per_job']} SQS requests a job "
                        f"(enqueue {result['sqs_requests_per_job_enqueue']}, drain "
                        f"{result['sqs_requests_per_job_drain']})"
                    )
            elif peer and timeout < args.timeout and str(result.get("error")).startswith("timed"):
                # Stopped by FAR: not a failure, a bound (what it did in the time it had).
                row["stopped_below_jobs_s"] = round(jobs / timeout, 1)
                console.print(
                    f"{system} ({backend}) stopped after {timeout:.0f} s, {FAR:g}x ours' drain: "
                    f"below {jobs / timeout:,.0f} jobs/s, so its runs end here"
                )
                row["stopped_at"] = result.get("counter")  # jobs done when it was stopped
                entry.stopped.append(row["stopped_below_jobs_s"])
            else:
                row["error"] = result.get("error")
                entry.errors.append(str(result.get("error")))
            emit(sink, row)
    rows = [{**entry.row(), **partitions_of(entry.backend), **common} for entry in runs.values()]
    for row in rows:
        row["processes"] = 1 if row["backend"] == "memory" else args.processes
        emit(
            sink,
            {
                "type": "result",
                "workload": "throughput",
                **row,
                "rounds": rounds,
                "counter_ok": row["ok"],
            },
        )
    for summary in report.summaries(rows):
        emit(sink, {"type": "summary", "workload": "throughput", **summary})
    return rows


def latency_urls(tmp: Path) -> dict[str, str]:
    tag = secrets.token_hex(4)
    return {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp / 'latency.db'}",
        "postgres": f"postgresql://postgres@127.0.0.1:5432/test?prefix=rqcmplat_{tag}_",
        "mysql": f"mysql://root@127.0.0.1:3306/test?prefix=rqcmplat_{tag}_",
        "redis": f"redis://127.0.0.1:6379/0?prefix=rqcmplat:{tag}:",
        "nats": f"{NATS_URL}/?prefix=rqcmplat_{tag}",
        "rabbitmq": f"{AMQP_URL}?prefix=rqcmplat_{tag}.&delays=1s",
    }


def latency(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    from .latency_run import measure

    plan: list[tuple[str, str, str]] = []
    for system, backend, module in choose(args, quiet=True):
        if backend not in LATENCY_BACKENDS:
            continue  # ours has no latency run there, so a peer's would compare with nothing
        if system != OURS and not args.latency_peers:
            continue
        plan.append((system, backend, module))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        urls = latency_urls(Path(tmp))
        for system, backend, module in plan:
            console.print(f"latency: {system} ({backend}) ...")
            if system == OURS:
                out = asyncio.run(
                    measure(
                        urls[backend],
                        args.latency_rate,
                        args.latency_samples,
                        concurrency=args.latency_concurrency,
                    )
                )
            else:
                out = run_adapter(
                    system,
                    backend,
                    module,
                    jobs=args.latency_samples,
                    processes=1,
                    concurrency=args.latency_concurrency,
                    timeout=args.timeout,
                    workload="latency",
                    rate=args.latency_rate,
                )
            if not out.get("ok"):
                console.print(f"[red]{system} ({backend}) latency FAILED[/red]: {out.get('error')}")
            row = {"system": system, "backend": backend, **out, "ok": bool(out.get("ok"))}
            rows.append(row)
            emit(
                sink,
                {
                    "type": "result",
                    "workload": "latency",
                    "at": now(),
                    **row,
                    "rate": args.latency_rate,
                    "counter_ok": row["ok"],
                },
            )
    return rows


def memory(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    plan = [(OURS, b, "bench.compare.ours") for b in args.memory_backends]
    for name in args.memory_peers:
        system, backend, module = MEMORY_PEERS[name]
        why = available(system, backend, module)
        if why:
            console.print(f"[yellow]skipping {system} ({backend}) memory run[/yellow]: {why}")
            continue
        plan.append((system, backend, module))
    rows: list[dict[str, Any]] = []
    for system, backend, module in plan:
        if args.backend and backend not in args.backend:
            continue
        console.print(f"memory: {system} ({backend}), {args.memory_jobs:,} jobs, 1 process ...")
        result = run_adapter(
            system,
            backend,
            module,
            jobs=args.memory_jobs,
            processes=1,
            concurrency=args.concurrency,
            timeout=args.memory_timeout,
            workload="memory",
        )
        ok = bool(result.get("ok"))
        row: dict[str, Any] = {
            "system": system,
            "backend": backend,
            "ok": ok,
            "jobs": args.memory_jobs,
            "e2e_jobs_s": round(args.memory_jobs / result["drain_s"], 1) if ok else None,
            **{k: result.get(k) for k in ("rss_start_kib", "rss_end_kib", "rss_peak_kib")},
            "rss_growth_kib": result.get("rss_growth_kib"),
            "error": result.get("error"),
        }
        rows.append(row)
        emit(
            sink,
            {
                "type": "result",
                "workload": "memory",
                "at": now(),
                **row,
                "concurrency": args.concurrency,
                "counter": result.get("counter"),
                "counter_ok": result.get("counter") == args.memory_jobs,
            },
        )
    return rows
