# SPDX-License-Identifier: MIT
"""Side-by-side throughput of rainier-queue and peer libraries, same services, same workload.

    .venv/bin/python -m bench.compare.run --jobs 5000 --processes 2 --concurrency 8 --rounds 3

For each backend (PostgreSQL, Redis) every system enqueues N jobs with its own
bulk API, then P worker processes at concurrency C drain them through the
system's own worker CLI. Each job INCRs one per-run Redis key; a run whose
counter does not end at exactly N is FAILED. Runs are interleaved (A B A B ...)
for R rounds and the medians are reported. Peers run from bench/.peers-venv
(created and filled from requirements-peers.txt on first use), each adapter
in a subprocess so that no peer import touches the project's venv.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import secrets
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEERS_VENV = ROOT / "bench" / ".peers-venv"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
REQUIREMENTS = HERE / "requirements-peers.txt"
STAMP = PEERS_VENV / ".requirements.sha256"
RESULTS = ROOT / "bench" / "results"
OURS = "rainier-queue"

# (system, backend, adapter module); ours first, then the peers in the brief's order.
SYSTEMS: list[tuple[str, str, str]] = [
    (OURS, "postgres", "bench.compare.ours"),
    ("pgqueuer", "postgres", "bench.compare.peers.pgqueuer"),
    ("procrastinate", "postgres", "bench.compare.peers.procrastinate"),
    (OURS, "redis", "bench.compare.ours"),
    ("taskiq", "redis", "bench.compare.peers.taskiq"),
    ("saq", "redis", "bench.compare.peers.saq"),
    ("dramatiq", "redis", "bench.compare.peers.dramatiq"),
    ("huey", "redis", "bench.compare.peers.huey"),
    ("rq", "redis", "bench.compare.peers.rq"),
    ("celery", "redis", "bench.compare.peers.celery"),
]

console = Console()


@dataclass(slots=True)
class Stats:
    system: str
    backend: str
    enqueue: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    runs: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.runs > 0 and not self.errors


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


def available(system: str, module: str) -> str | None:
    """None if the adapter can be imported by its venv, else why not."""
    path = ROOT / Path(*module.split(".")).with_suffix(".py")
    if not path.exists():
        return "no adapter"
    probe = subprocess.run(
        [python_for(system), "-c", f"import {module}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "RQCOMPARE_TAG": "probe"},
    )
    if probe.returncode:
        return (probe.stderr.strip().splitlines() or ["import failed"])[-1]
    return None


def run_once(system: str, backend: str, module: str, args: argparse.Namespace) -> dict[str, Any]:
    tag = secrets.token_hex(4)
    command = [
        python_for(system),
        "-m",
        module,
        "--jobs",
        str(args.jobs),
        "--processes",
        str(args.processes),
        "--concurrency",
        str(args.concurrency),
        "--tag",
        tag,
        "--timeout",
        str(args.timeout),
        "--backend",
        backend,
    ]
    proc = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "RQCOMPARE_TAG": tag},
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


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def table_for(backend: str, stats: list[Stats], args: argparse.Namespace) -> tuple[Table, dict]:
    ours = next((s for s in stats if s.system == OURS), None)
    peers = [s for s in stats if s.system != OURS and s.ok]
    fastest = max(peers, key=lambda s: statistics.median(s.e2e), default=None)
    title = (
        f"{backend}: {args.jobs} jobs, {args.processes} processes x concurrency "
        f"{args.concurrency}, median of {args.rounds} rounds"
    )
    table = Table(title=title)
    table.add_column("system")
    table.add_column("enqueue jobs/s", justify="right")
    table.add_column("end-to-end jobs/s", justify="right")
    table.add_column("runs ok", justify="right")
    table.add_column("ours / this (e2e)", justify="right")
    for s in stats:
        good = s.runs - len(s.errors)
        ratio = "-"
        if ours and ours.ok and s.ok and s is not ours:
            ratio = f"{statistics.median(ours.e2e) / statistics.median(s.e2e):.2f}x"
        e2e = fmt(s.e2e) if s.ok else "[red]FAILED[/red]"
        table.add_row(s.system, fmt(s.enqueue) if s.ok else "-", e2e, f"{good}/{s.runs}", ratio)
    summary: dict[str, Any] = {"type": "summary", "backend": backend, "fastest_peer": None}
    if fastest is not None:
        summary["fastest_peer"] = fastest.system
        if ours and ours.ok:
            e2e_ratio = statistics.median(ours.e2e) / statistics.median(fastest.e2e)
            enq_ratio = statistics.median(ours.enqueue) / statistics.median(fastest.enqueue)
            summary["ours_over_fastest_e2e"] = round(e2e_ratio, 3)
            summary["ours_over_fastest_enqueue"] = round(enq_ratio, 3)
            table.caption = (
                f"rainier-queue / fastest peer end-to-end ({fastest.system}): end-to-end "
                f"{e2e_ratio:.2f}x, enqueue {enq_ratio:.2f}x"
            )
    return table, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument("--only", help="comma-separated peers to run (ours always runs)")
    parser.add_argument("--backend", choices=["postgres", "redis"], help="only this backend")
    args = parser.parse_args()
    only = {name.strip() for name in args.only.split(",")} if args.only else None

    ensure_peers_venv()
    chosen: list[tuple[str, str, str]] = []
    for system, backend, module in SYSTEMS:
        if args.backend and backend != args.backend:
            continue
        if only is not None and system != OURS and system not in only:
            continue
        why = available(system, module)
        if why:
            console.print(f"[yellow]skipping {system} ({backend})[/yellow]: {why}")
            continue
        chosen.append((system, backend, module))

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"compare-{dt.date.today().isoformat()}.jsonl"
    stats = {(s, b): Stats(s, b) for s, b, _ in chosen}
    common = {"jobs": args.jobs, "processes": args.processes, "concurrency": args.concurrency}
    with out.open("a") as sink:
        for round_no in range(1, args.rounds + 1):
            for system, backend, module in chosen:
                console.print(f"round {round_no}/{args.rounds}: {system} ({backend}) ...")
                result = run_once(system, backend, module, args)
                entry = stats[system, backend]
                entry.runs += 1
                row: dict[str, Any] = {
                    "type": "run",
                    "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "round": round_no,
                    "system": system,
                    "backend": backend,
                    **common,
                    "ok": bool(result.get("ok")),
                }
                if result.get("ok"):
                    row["enqueue_jobs_s"] = round(args.jobs / result["enqueue_s"], 1)
                    row["e2e_jobs_s"] = round(args.jobs / result["drain_s"], 1)
                    entry.enqueue.append(row["enqueue_jobs_s"])
                    entry.e2e.append(row["e2e_jobs_s"])
                else:
                    row["error"] = result.get("error")
                    row["counter"] = result.get("counter")
                    entry.errors.append(str(result.get("error")))
                sink.write(json.dumps(row) + "\n")
                sink.flush()
        for backend in ("postgres", "redis"):
            group = [s for (_, b), s in stats.items() if b == backend]
            if not group:
                continue
            table, summary = table_for(backend, group, args)
            console.print(table)
            summary.update(common, rounds=args.rounds)
            summary["systems"] = {
                s.system: {
                    "ok": s.ok,
                    "runs": s.runs,
                    "enqueue_jobs_s": statistics.median(s.enqueue) if s.enqueue else None,
                    "e2e_jobs_s": statistics.median(s.e2e) if s.e2e else None,
                }
                for s in group
            }
            sink.write(json.dumps(summary) + "\n")
    console.print(f"results appended to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
