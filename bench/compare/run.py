# SPDX-License-Identifier: MIT
"""The whole comparison in one command: rainier-queue beside its peers, same services, same jobs.

A performance claim is only worth what the benchmark behind it is, so this
one runs everything a reader needs to check ours against what they would pick
instead, on their own machine, in one go (`make bench` calls it):

    .venv/bin/python -m bench.compare.run                 # everything, about 20 min on 2 cores
    .venv/bin/python -m bench.compare.run --workloads throughput --backend postgres --rounds 1

Workloads:

- **throughput**: every system enqueues N jobs with its own bulk API, then P
  worker processes at concurrency C drain them through the system's own
  worker CLI. Ours runs on every driver (memory, SQLite, PostgreSQL,
  MySQL/MariaDB, Redis, and Kafka on a Tansu broker started for each run,
  one topic of `constants.KAFKA_PARTITIONS` partitions, no peer beside it);
  the peers on theirs. Runs are interleaved (A B C A B C ...) for R rounds
  and the medians reported.
- **latency**: ours on every driver, an idle worker, jobs pushed one at a
  time at a fixed rate; push-to-start p50/p99 (bench/compare/latency_run.py).
- **memory**: a long run (100,000 jobs by default) through one worker process,
  with its resident memory at the first job, at the last job, and the peak.
- **features**: worker instructions per job with metrics on and with
  encrypted payloads, beside the plain worker, under callgrind
  (bench/compare/features.py).

Every job INCRs one per-run Redis key (the latency job writes one line); a
run whose count does not land exactly on N is FAILED and gives no number.
Peers run from bench/.peers-venv, created and filled from the pinned
requirements-peers.txt on first use; each adapter runs in a subprocess so no
peer import touches the project's venv. The output is rich tables with
ratios to the fastest peer per backend, JSON lines appended to
bench/results/compare-<date>.jsonl, the whole result in
bench/results/latest.json, and a PNG chart drawn by the peers' venv
(matplotlib lives there, not in the project) to bench/results/latest.png.
`--write-readme` rewrites the marked block of README.md from this run and
copies the chart to the tracked bench/results/compare.png it shows;
`python -m bench.compare.readme` does the same later from latest.json.

This module is the command line and the printing; `workloads.py` runs the
three workloads, `adapters.py` runs one adapter in the venv it needs, and
`report.py` does the arithmetic, the tables and the README block.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from . import constants, grid_report, labels, report
from .adapters import compile_bytecode, console, draw_chart, ensure_peers_venv
from .constants import ROOT
from .features import feature_costs, table_lines
from .grid import backlog, concurrency_cells, enqueue_ways, io_bound
from .workloads import LATENCY_CONCURRENCY, MEMORY_PEERS, latency, memory, now, throughput

RESULTS = ROOT / "bench" / "results"
CHART = RESULTS / "latest.png"
LATEST = RESULTS / "latest.json"
COMMAND_ENV = "RQBENCH_COMMAND"  # set by `make bench` so the README names the command typed
WORKLOADS = (
    "throughput",
    "latency",
    "memory",
    "grid",
    "io",
    "enqueue",
    "backlog",
    "features",
)
QUICK = {
    "jobs": 2000,
    "rounds": 1,
    "latency_samples": 100,
    "grid_jobs": 5000,
    "io_jobs": 3000,
    "backlog": 50_000,
}
"""`--quick`: every workload but memory, small and once, for day-to-day checks."""


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
    parser.add_argument(
        "--only",
        help="comma-separated peers to run, by name (every mode: huey) or one mode (huey/thread);"
        " ours always runs",
    )
    parser.add_argument("--no-peers", action="store_true", help="ours only (no peers' venv)")
    parser.add_argument(
        "--backend",
        help="comma-separated backends (memory,sqlite,postgres,mysql,redis,kafka,nats,rabbitmq,sqs)"
        " [all]",
    )
    parser.add_argument("--latency-rate", type=float, default=50.0, help="[%(default)s]/s")
    parser.add_argument("--latency-samples", type=int, default=300, help="[%(default)s]")
    parser.add_argument(
        "--latency-concurrency",
        type=int,
        default=LATENCY_CONCURRENCY,
        help="the idle worker's concurrency, every system [%(default)s]",
    )
    parser.add_argument(
        "--no-latency-peers", dest="latency_peers", action="store_false", help="ours only"
    )
    parser.add_argument("--memory-jobs", type=int, default=100_000, help="[%(default)s]")
    parser.add_argument(
        "--memory-backends", default="memory,redis", help="ours, comma-separated [%(default)s]"
    )
    parser.add_argument(
        "--memory-peers",
        default="huey",
        help=f"peers in the memory run ({', '.join(MEMORY_PEERS)}, or none) [%(default)s]",
    )
    parser.add_argument("--memory-timeout", type=float, default=600.0, help="s [%(default)s]")
    parser.add_argument("--grid-jobs", type=int, default=20_000, help="[%(default)s]")
    parser.add_argument(
        "--grid-concurrency", default="8,32", help="per process, comma-separated [%(default)s]"
    )
    parser.add_argument(
        "--grid-peers", type=int, default=2, help="at most this many peers a backend [%(default)s]"
    )
    parser.add_argument(
        "--grid-rounds", type=int, help="rounds of the grid, io and enqueue runs [--rounds]"
    )
    parser.add_argument("--io-jobs", type=int, default=10_000, help="[%(default)s]")
    parser.add_argument("--io-concurrency", type=int, default=64, help="[%(default)s]")
    parser.add_argument("--io-sleep-ms", type=float, default=20.0, help="[%(default)s]")
    parser.add_argument("--backlog", type=int, default=1_000_000, help="jobs [%(default)s]")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small and once: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()),
    )
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
    if args.quick:
        given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
        for key, value in QUICK.items():
            if key not in given:
                setattr(args, key, value)
        if "workloads" not in given:
            args.workloads = ",".join(w for w in WORKLOADS if w != "memory")

    def split(text: str | None) -> list[str] | None:
        if text is None:
            return None
        return [part.strip() for part in text.split(",") if part.strip()]

    args.workloads = split(args.workloads) or []
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {', '.join(WORKLOADS)}")
    try:
        args.grid_concurrency = [int(c) for c in split(args.grid_concurrency) or []]
    except ValueError:
        parser.error("--grid-concurrency takes whole numbers, such as 8,32")
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
    if min(args.jobs, args.rounds, args.memory_jobs, args.latency_samples) < 1:
        parser.error("--jobs, --rounds, --memory-jobs and --latency-samples must be positive")
    if args.latency_concurrency < 1:
        parser.error("--latency-concurrency must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    began = time.monotonic()
    if not args.no_peers:
        ensure_peers_venv()
    compile_bytecode()
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
            "latency_concurrency": args.latency_concurrency,
            "memory_jobs": args.memory_jobs,
            "grid_jobs": args.grid_jobs,
            "grid_rounds": args.grid_rounds or args.rounds,
            "grid_concurrency": args.grid_concurrency,
            "io_jobs": args.io_jobs,
            "io_concurrency": args.io_concurrency,
            "io_sleep_ms": args.io_sleep_ms,
            "backlog": args.backlog,
            "quick": args.quick,
        },
        "throughput": [],
        "latency": [],
        "memory": [],
        "grid": [],
        "io": [],
        "enqueue": [],
        "backlog": [],
        "features": [],
    }
    steps: dict[str, Callable[[TextIO], list[dict[str, Any]]]] = {
        "throughput": lambda sink: throughput(args, sink),
        "latency": lambda sink: latency(args, sink),
        "memory": lambda sink: memory(args, sink),
        "grid": lambda sink: concurrency_cells(args, sink, result["throughput"]),
        "io": lambda sink: io_bound(args, sink),
        "enqueue": lambda sink: enqueue_ways(args, sink),
        "backlog": lambda sink: backlog(args, sink),
        "features": lambda sink: feature_costs(args, sink),
    }
    result["workload_s"] = {}
    with out.open("a") as sink:
        for name, step in steps.items():
            if name in args.workloads:
                started = time.monotonic()
                result[name] = step(sink)
                result["workload_s"][name] = round(time.monotonic() - started, 1)
    result["summaries"] = report.summaries(result["throughput"])
    result["names"] = {
        r["system"]: labels.system_name(r["system"])
        for kind in ("throughput", "latency", "memory", "grid", "io", "backlog")
        for r in result[kind]
    }

    p = result["params"]
    rows = result["throughput"]
    for backend in labels.ordered_backends(r["backend"] for r in rows):
        title = (
            f"{p['jobs']:,} jobs, {p['processes']} processes x concurrency "
            f"{p['concurrency']}, median of {p['rounds']} rounds"
        )
        if backend == "memory":
            title = title.replace(f"{p['processes']} processes", "1 process")
        if backend == "kafka":
            title = title.replace(
                " processes", f" processes on {constants.KAFKA_PARTITIONS} partitions"
            )
        console.print(report.throughput_table(rows, backend, title))
    if result["latency"]:
        title = (
            f"{p['latency_samples']} jobs at {p['latency_rate']:g}/s, idle worker, "
            f"concurrency {p.get('latency_concurrency', LATENCY_CONCURRENCY)}"
        )
        console.print(report.latency_table(result["latency"], title))
    if result["memory"]:
        title = f"{p['memory_jobs']:,} jobs through one worker process"
        console.print(report.memory_table(result["memory"], title))
    for table in grid_report.tables(result):
        console.print(table)
    if result["features"]:
        console.print("what the opt-in features cost a job (worker instructions, callgrind):")
        for line in table_lines(result["features"]):
            console.print("  " + line)

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
        f"{r.get('system', constants.OURS)} ({r['backend']}, {kind})"
        for kind in ("throughput", "latency", "memory", "grid", "io", "enqueue", "backlog")
        for r in result[kind]
        if not r["ok"] and not r.get("stopped_below_jobs_s")
    ]
    if failed:
        console.print(f"[red]FAILED[/red]: {', '.join(failed)}")
    stopped = [
        f"{r['system']} ({r['backend']}, {kind}) below {r['stopped_below_jobs_s']:,.0f} jobs/s"
        for kind in ("throughput", "grid", "io")
        for r in result[kind]
        if r.get("stopped_below_jobs_s")
    ]
    if stopped:
        console.print(f"stopped far behind ours (a bound, not a failure): {', '.join(stopped)}")
    total = result["total_s"]
    spent = ", ".join(f"{name} {s / 60:.1f}" for name, s in result["workload_s"].items())
    console.print(f"total run time: {int(total // 60)} min {total % 60:.0f} s ({spent} min)")


if __name__ == "__main__":
    main()
