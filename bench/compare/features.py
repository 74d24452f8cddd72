# SPDX-License-Identifier: MIT
"""What the opt-in features cost a job, in worker instructions: metrics and encryption.

Why: metrics and encrypted payloads are off by default, and a user who
turns one on should know its price per job; a change that made the plain
path pay for them should show too. Seconds would not tell: CPU time per
job swings by more than these costs on a shared two-core machine. So this
counts instructions under callgrind (bench/worker_instructions.py, which
also says what is counted), for the plain worker and for each feature on,
on `memory://` (the worker alone) and SQLite (the worker and a driver).
The differences are the features' costs; the plain row is the baseline the
speed work watches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, TextIO

from ..worker_instructions import per_job
from .adapters import console
from .workloads import now

BACKENDS = ("memory://", "sqlite")
VARIANTS: dict[str, dict[str, bool]] = {
    "plain": {},
    "metrics": {"metrics": True},
    "encrypted": {"encrypted": True},
}
JOBS = 5000
CONCURRENCY = 32


def feature_costs(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    """One row per backend and variant: instructions per job, and the difference from plain."""
    if shutil.which("valgrind") is None:
        console.print("[yellow]features: valgrind is not installed; skipped[/yellow]")
        return []
    jobs = min(JOBS, args.jobs)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in BACKENDS:
            counted: dict[str, float] = {}
            for variant, options in VARIANTS.items():
                console.print(f"features: {variant} ({backend}) under callgrind ...")
                counted[variant] = per_job(
                    backend,
                    jobs,
                    CONCURRENCY,
                    Path(tmp),
                    metrics=options.get("metrics", False),
                    encrypted=options.get("encrypted", False),
                )
            for variant, cost in counted.items():
                row = {
                    "type": "run",
                    "workload": "features",
                    "at": now(),
                    "backend": backend.rstrip(":/"),
                    "variant": variant,
                    "jobs": jobs,
                    "concurrency": CONCURRENCY,
                    "instructions_per_job": round(cost),
                    "over_plain": round(cost - counted["plain"]),
                    "ok": True,
                }
                sink.write(json.dumps(row) + "\n")
                rows.append(row)
    return rows


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as text: one line per backend and variant."""
    lines = []
    for row in rows:
        extra = "" if row["variant"] == "plain" else f" ({row['over_plain']:+,} over plain)"
        lines.append(
            f"{row['backend']:<7} {row['variant']:<10} {row['instructions_per_job']:>10,}"
            f" instructions per job{extra}"
        )
    return lines


__all__ = ["feature_costs", "table_lines"]
