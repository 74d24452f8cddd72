# SPDX-License-Identifier: MIT
"""The whole comparison in one command: rainier-queue beside its peers, same services, same jobs.

A performance claim is only worth what the benchmark behind it is, so this
one runs everything a reader needs to check ours against what they would pick
instead, on their own machine, in one go (`make bench` calls it):

    .venv/bin/python -m bench.compare.run                 # everything, under 15 min on 2 cores
    .venv/bin/python -m bench.compare.run --workloads throughput --backend postgres --rounds 1

Workloads:

- **throughput**: every system enqueues N jobs with its own bulk API, then P
  worker processes at concurrency C drain them through the system's own
  worker CLI. Ours runs on every driver (memory, SQLite, PostgreSQL,
  MySQL/MariaDB, Redis, and Kafka on a Tansu broker started for each run,
  one topic of `report.KAFKA_PARTITIONS` partitions, no peer beside it);
  the peers on theirs. Runs are interleaved (A B C A B C ...) for R rounds
  and the medians reported.
- **latency**: ours on every driver, an idle worker, jobs pushed one at a
  time at a fixed rate; push-to-start p50/p99 (bench/compare/latency_run.py).
- **memory**: a long run (200,000 jobs by default) through one worker process,
  with its resident memory at the first job, at the last job, and the peak.

Every job INCRs one per-run Redis key (the latency job writes one line); a
run whose count does not land exactly on N is FAILED and gives no number.
Peers run from bench/.peers-venv, created and filled from the pinned
requirements-peers.txt on first use; each adapter runs in a subprocess so no
peer import touches the project's venv. The output is rich tables with
ratios to the fastest peer per backend, JSON lines appended to
bench/results/compare-<date>.jsonl, the whole result in
bench/results/latest.json, and a PNG chart drawn by the peers' venv
(matplotlib lives there, not in the project). `--write-readme` rewrites the
marked block of README.md from this run; `python -m bench.compare.readme`
does the same later from latest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from . import report
from .report import OURS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEERS_VENV = ROOT / "bench" / ".peers-venv"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
REQUIREMENTS = HERE / "requirements-peers.txt"
STAMP = PEERS_VENV / ".requirements.sha256"
RESULTS = ROOT / "bench" / "results"
CHART = RESULTS / "compare.png"
LATEST = RESULTS / "latest.json"
COMMAND_ENV = "RQBENCH_COMMAND"  # set by `make bench` so the README names the command typed
WORKLOADS = ("throughput", "latency", "memory")

# (system, backend, adapter module): ours first on each backend, then the peers.
SYSTEMS: list[tuple[str, str, str]] = [
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
]
LATENCY_BACKENDS = ("memory", "sqlite", "postgres", "mysql", "redis")
LATENCY_CONCURRENCY = 4  # the same as bench/latency.py gives our worker
MEMORY_PEERS = {"huey": ("redis", "bench.compare.peers.huey")}

console = Console(width=max(Console().width, 120))  # tables stay readable in a log


@dataclass(slots=True)
class Runs:
    """Every run of one system on one backend in one workload."""

    system: str
    backend: str
    enqueue: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    steady: list[float] = field(default_factory=list)
    runs: int = 0
    errors: list[str] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.runs > 0 and not self.errors

    def row(self) -> dict[str, Any]:
        enqueue = report.median(self.enqueue) if self.ok else None
        e2e = report.median(self.e2e) if self.ok else None
        steady = report.median(self.steady) if self.ok else None
        return {
            "system": self.system,
            "backend": self.backend,
            "ok": self.ok,
            "runs": self.runs,
            "runs_ok": self.runs - len(self.errors),
            "enqueue_jobs_s": round(enqueue, 1) if enqueue is not None else None,
            "e2e_jobs_s": round(e2e, 1) if e2e is not None else None,
            "steady_jobs_s": round(steady, 1) if steady is not None else None,
            "errors": self.errors,
        }


def ensure_peers_venv() -> None:
    """Create bench/.peers-venv and install the pinned peers, unless already done."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        return
    if not PEERS_PYTHON.exists():
        console.print(f"creating {PEERS_VENV.relative_to(ROOT)}")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(PEERS_VENV)], check=True)
    console.print(f"installing {REQUIREMENTS.relative_to(ROOT)} into the peers venv")
    subprocess.run(
        [str(PEERS_PYTHON), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True
    )
    STAMP.write_text(digest + "\n")


def python_for(system: str) -> str:
    return sys.executable if system == OURS else str(PEERS_PYTHON)


def adapter_env(tag: str, backend: str) -> dict[str, str]:
    return {**os.environ, "RQCOMPARE_TAG": tag, "RQCOMPARE_BACKEND": backend}


_available: dict[tuple[str, str, str], str | None] = {}


def available(system: str, backend: str, module: str) -> str | None:
    """None if the adapter can be imported by its venv, else why not (asked once per run)."""
    key = (system, backend, module)
    if key not in _available:
        _available[key] = _probe(system, backend, module)
    return _available[key]


def _probe(system: str, backend: str, module: str) -> str | None:
    path = ROOT / Path(*module.split(".")).with_suffix(".py")
    if not path.exists():
        return "no adapter"
    probe = subprocess.run(
        [python_for(system), "-c", f"import {module}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=adapter_env("probe", backend),
    )
    if probe.returncode:
        return (probe.stderr.strip().splitlines() or ["import failed"])[-1]
    return None


def run_adapter(
    system: str,
    backend: str,
    module: str,
    *,
    jobs: int,
    processes: int,
    concurrency: int,
    timeout: float,
    workload: str = "throughput",
    rate: float = 50.0,
) -> dict[str, Any]:
    """One run of one adapter in its own subprocess; its JSON result."""
    tag = secrets.token_hex(4)
    command = [
        *(python_for(system), "-m", module, "--jobs", str(jobs)),
        *("--processes", str(processes), "--concurrency", str(concurrency)),
        *("--tag", tag, "--timeout", str(timeout), "--backend", backend),
        *("--workload", workload),
    ]
    if workload == "memory":
        command.append("--rss")
    if workload == "latency":
        command += ["--rate", str(rate)]
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env=adapter_env(tag, backend)
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        result = {"ok": False, "error": f"adapter exited {proc.returncode} without a result"}
    if not result.get("ok"):
        console.print(f"[red]{system} ({backend}) FAILED[/red]: {result.get('error')}")
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        if tail:
            console.print(tail, markup=False, highlight=False)
    return result


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def emit(sink: TextIO, row: dict[str, Any]) -> None:
    sink.write(json.dumps(row) + "\n")
    sink.flush()


def choose(args: argparse.Namespace, quiet: bool = False) -> list[tuple[str, str, str]]:
    chosen: list[tuple[str, str, str]] = []
    for system, backend, module in SYSTEMS:
        if args.backend and backend not in args.backend:
            continue
        if args.only is not None and system != OURS and system not in args.only:
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
    return {"partitions": report.KAFKA_PARTITIONS} if backend == "kafka" else {}


def throughput(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    chosen = choose(args)
    runs = {(s, b): Runs(s, b) for s, b, _ in chosen}
    common = {"jobs": args.jobs, "processes": args.processes, "concurrency": args.concurrency}
    for round_no in range(1, args.rounds + 1):
        for system, backend, module in chosen:
            console.print(f"throughput round {round_no}/{args.rounds}: {system} ({backend}) ...")
            processes = 1 if backend == "memory" else args.processes
            result = run_adapter(
                system,
                backend,
                module,
                jobs=args.jobs,
                processes=processes,
                concurrency=args.concurrency,
                timeout=args.timeout,
            )
            entry = runs[system, backend]
            entry.runs += 1
            ok = bool(result.get("ok"))
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
                "counter_ok": result.get("counter") == args.jobs,
            }
            if ok:
                if result.get("enqueue_s"):
                    row["enqueue_jobs_s"] = round(args.jobs / result["enqueue_s"], 1)
                    entry.enqueue.append(row["enqueue_jobs_s"])
                row["e2e_jobs_s"] = round(args.jobs / result["drain_s"], 1)
                entry.e2e.append(row["e2e_jobs_s"])
                if result.get("steady_s"):
                    row["steady_jobs_s"] = round(result["steady_jobs"] / result["steady_s"], 1)
                    entry.steady.append(row["steady_jobs_s"])
            else:
                row["error"] = result.get("error")
                entry.errors.append(str(result.get("error")))
            emit(sink, row)
    rows = [{**entry.row(), **partitions_of(entry.backend)} for entry in runs.values()]
    for row in rows:
        emit(
            sink,
            {
                "type": "result",
                "workload": "throughput",
                **row,
                **common,
                "processes": 1 if row["backend"] == "memory" else args.processes,
                "rounds": args.rounds,
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
    }


def latency(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    from .latency_run import measure

    plan: list[tuple[str, str, str]] = []
    for system, backend, module in choose(args, quiet=True):
        if system == OURS and backend not in LATENCY_BACKENDS:
            continue
        if system != OURS and not args.latency_peers:
            continue
        plan.append((system, backend, module))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        urls = latency_urls(Path(tmp))
        for system, backend, module in plan:
            console.print(f"latency: {system} ({backend}) ...")
            if system == OURS:
                out = asyncio.run(measure(urls[backend], args.latency_rate, args.latency_samples))
            else:
                out = run_adapter(
                    system,
                    backend,
                    module,
                    jobs=args.latency_samples,
                    processes=1,
                    concurrency=LATENCY_CONCURRENCY,
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
        backend, module = MEMORY_PEERS[name]
        why = available(name, backend, module)
        if why:
            console.print(f"[yellow]skipping {name} ({backend}) memory run[/yellow]: {why}")
            continue
        plan.append((name, backend, module))
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


def draw_chart(result: dict[str, Any], path: Path) -> bool:
    """Draw the PNG with the peers' venv (matplotlib lives there); False if it could not."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(result, handle)
    try:
        proc = subprocess.run(
            [str(PEERS_PYTHON), "-m", "bench.compare.chart", handle.name, str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(handle.name)
    if proc.returncode:
        console.print(f"[yellow]no chart[/yellow]: {proc.stderr.strip()[-500:]}")
        return False
    return True


def command_line(argv: list[str], typed: str | None = None) -> str:
    """The command to print beside the numbers: what was typed, less `--write-readme`.

    Writing the README changes nothing that was measured, so a reader copying
    the command should not overwrite their README with it.
    """
    typed = os.environ.get(COMMAND_ENV) if typed is None else typed
    if typed:
        text = re.sub(r"\s*--write-readme(?:=\S+|\s+(?!-)[^\s']+)?", "", typed)
        return re.sub(r"\s*BENCH_ARGS=(''|\"\")", "", text)
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip and not arg.startswith("-"):
            skip = False
            continue
        skip = arg == "--write-readme"
        if not skip and not arg.startswith("--write-readme="):
            kept.append(arg)
    return shlex.join([".venv/bin/python", "-m", "bench.compare.run", *kept])


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="[%(default)s]")
    parser.add_argument("--jobs", type=int, default=5000, help="throughput N [%(default)s]")
    parser.add_argument("--processes", type=int, default=2, help="[%(default)s]")
    parser.add_argument("--concurrency", type=int, default=8, help="[%(default)s]")
    parser.add_argument("--rounds", type=int, default=3, help="[%(default)s]")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, s [%(default)s]")
    parser.add_argument("--only", help="comma-separated peers to run (ours always runs)")
    parser.add_argument("--no-peers", action="store_true", help="ours only (no peers' venv)")
    parser.add_argument(
        "--backend",
        help="comma-separated backends (memory,sqlite,postgres,mysql,redis,kafka) [all]",
    )
    parser.add_argument("--latency-rate", type=float, default=50.0, help="[%(default)s]/s")
    parser.add_argument("--latency-samples", type=int, default=300, help="[%(default)s]")
    parser.add_argument(
        "--no-latency-peers", dest="latency_peers", action="store_false", help="ours only"
    )
    parser.add_argument("--memory-jobs", type=int, default=200_000, help="[%(default)s]")
    parser.add_argument(
        "--memory-backends", default="memory,redis", help="ours, comma-separated [%(default)s]"
    )
    parser.add_argument(
        "--memory-peers",
        default="huey",
        help=f"peers in the memory run ({', '.join(MEMORY_PEERS)}, or none) [%(default)s]",
    )
    parser.add_argument("--memory-timeout", type=float, default=600.0, help="s [%(default)s]")
    parser.add_argument("--chart", type=Path, default=CHART, help="PNG path [bench/results/...]")
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument(
        "--write-readme",
        nargs="?",
        const=ROOT / "README.md",
        type=Path,
        metavar="PATH",
        help="rewrite the <!-- bench:start/end --> block of this README [README.md]",
    )
    args = parser.parse_args(argv)

    def split(text: str | None) -> list[str] | None:
        if text is None:
            return None
        return [part.strip() for part in text.split(",") if part.strip()]

    args.workloads = split(args.workloads) or []
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {', '.join(WORKLOADS)}")
    args.backend = split(args.backend)
    args.only = split(args.only)
    args.memory_backends = split(args.memory_backends) or []
    peers = split(args.memory_peers) or []
    args.memory_peers = [] if peers == ["none"] or args.no_peers else peers
    for name in args.memory_peers:
        if name not in MEMORY_PEERS:
            parser.error(f"--memory-peers: no memory adapter for {name!r}")
    if args.write_readme is not None:
        try:  # find out now, not after a quarter of an hour of benchmarking
            report.replace_block(args.write_readme.read_text(), "")
        except (OSError, ValueError) as exc:
            parser.error(f"--write-readme {args.write_readme}: {exc}")
    if args.jobs < 1 or args.rounds < 1 or args.memory_jobs < 1 or args.latency_samples < 1:
        parser.error("--jobs, --rounds, --memory-jobs and --latency-samples must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    began = time.monotonic()
    if not args.no_peers:
        ensure_peers_venv()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"compare-{dt.date.today().isoformat()}.jsonl"
    result: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "started_at": now(),
        "machine": report.machine(),
        "command": command_line(argv),
        "params": {
            "jobs": args.jobs,
            "processes": args.processes,
            "concurrency": args.concurrency,
            "rounds": args.rounds,
            "latency_rate": args.latency_rate,
            "latency_samples": args.latency_samples,
            "memory_jobs": args.memory_jobs,
        },
        "throughput": [],
        "latency": [],
        "memory": [],
    }
    with out.open("a") as sink:
        if "throughput" in args.workloads:
            result["throughput"] = throughput(args, sink)
        if "latency" in args.workloads:
            result["latency"] = latency(args, sink)
        if "memory" in args.workloads:
            result["memory"] = memory(args, sink)
    result["summaries"] = report.summaries(result["throughput"])
    result["names"] = {
        r["system"]: report.system_name(r["system"])
        for kind in ("throughput", "latency", "memory")
        for r in result[kind]
    }

    p = result["params"]
    rows = result["throughput"]
    for backend in report.ordered_backends(r["backend"] for r in rows):
        title = (
            f"{p['jobs']:,} jobs, {p['processes']} processes x concurrency "
            f"{p['concurrency']}, median of {p['rounds']} rounds"
        )
        if backend == "memory":
            title = title.replace(f"{p['processes']} processes", "1 process")
        if backend == "kafka":
            title = title.replace(
                " processes", f" processes on {report.KAFKA_PARTITIONS} partitions"
            )
        console.print(report.throughput_table(rows, backend, title))
    if result["latency"]:
        title = f"{p['latency_samples']} jobs at {p['latency_rate']:g}/s, idle worker"
        console.print(report.latency_table(result["latency"], title))
    if result["memory"]:
        title = f"{p['memory_jobs']:,} jobs through one worker process"
        console.print(report.memory_table(result["memory"], title))

    chart: str | None = None
    if rows and not args.no_chart and not args.no_peers and draw_chart(result, args.chart):
        chart = os.path.relpath(args.chart, ROOT)
        console.print(f"chart: {chart}")
    result["chart"] = chart
    result["total_s"] = round(time.monotonic() - began, 1)
    LATEST.write_text(json.dumps(result, indent=1) + "\n")
    console.print(f"JSON lines appended to {out.relative_to(ROOT)}; whole run in {LATEST.name}")
    if args.write_readme is not None:
        report.write_readme(args.write_readme, result, chart)
        console.print(f"rewrote the bench block of {args.write_readme}")
    failed = [
        f"{r['system']} ({r['backend']}, {kind})"
        for kind in ("throughput", "latency", "memory")
        for r in result[kind]
        if not r["ok"]
    ]
    if failed:
        console.print(f"[red]FAILED[/red]: {', '.join(failed)}")
    total = result["total_s"]
    console.print(f"total run time: {int(total // 60)} min {total % 60:.0f} s")


if __name__ == "__main__":
    main()
