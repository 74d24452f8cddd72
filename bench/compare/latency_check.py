# SPDX-License-Identifier: MIT
"""Push-to-start samples: how a job records its start, and the exact count every run must pass.

Shared by ours (bench/compare/latency_run.py, the project's venv) and the
peers' latency runs (peers/_common.py, the peers' venv), so it is stdlib only.
A job appends one line, `seq pushed_at started_at`, to the file named by
`RQBENCH_LATENCY_OUT`, in one `O_APPEND` write (lines from concurrent jobs
never interleave). The file must end with exactly one line per pushed job,
the warm-up job (seq -1) included: a missing line is a lost job, a second
line a double start, and either makes the run FAILED, never a number.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

OUT_ENV = "RQBENCH_LATENCY_OUT"  # the same variable bench/latency_jobs.py writes to
WARM_UP = -1


def record(seq: int, pushed_at: float) -> None:
    """Called first thing by a latency job: append its line to the results file."""
    started_at = time.time()
    line = f"{seq} {pushed_at!r} {started_at!r}\n".encode()
    fd = os.open(os.environ[OUT_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_latencies(path: Path) -> dict[int, float]:
    """seq -> push-to-start in ms (the first line per seq wins; unfinished lines are skipped)."""
    found: dict[int, float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                found.setdefault(int(parts[0]), (float(parts[2]) - float(parts[1])) * 1000)
    return found


def count_lines(path: Path) -> Counter[int]:
    """How many complete lines each seq has in the results file."""
    seen: Counter[int] = Counter()
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                seen[int(parts[0])] += 1
    return seen


def check_counts(seen: Counter[int], samples: int) -> str | None:
    """None if the warm-up and 0..samples-1 each appear exactly once, else what went wrong."""
    want = {WARM_UP, *range(samples)}
    missing = sorted(want - seen.keys())
    doubled = sorted(seq for seq, n in seen.items() if n > 1)
    stray = sorted(seen.keys() - want)
    problems = []
    if missing:
        problems.append(f"{len(missing)} jobs never started")
    if doubled:
        problems.append(f"{len(doubled)} jobs started more than once")
    if stray:
        problems.append(f"{len(stray)} unexpected jobs")
    return "; ".join(problems) or None


def percentile(ordered: Sequence[float], pct: float) -> float:
    """The `pct` percentile of sorted values, interpolating between neighbours."""
    if not ordered:
        return math.nan
    rank = (len(ordered) - 1) * pct / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(path: Path, samples: int) -> dict[str, object]:
    """ok, samples, p50/p90/p99/max in ms, and the count check's complaint if any."""
    values = sorted(ms for seq, ms in read_latencies(path).items() if seq >= 0)
    problem = check_counts(count_lines(path), samples)
    out: dict[str, object] = {
        "ok": problem is None,
        "expected": samples,
        "samples": len(values),
        "p50_ms": round(percentile(values, 50), 3),
        "p90_ms": round(percentile(values, 90), 3),
        "p99_ms": round(percentile(values, 99), 3),
        "max_ms": round(values[-1], 3) if values else math.nan,
    }
    if problem is not None:
        out["error"] = problem
    return out
