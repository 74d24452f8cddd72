# SPDX-License-Identifier: MIT
"""The latency workload of bench.compare: bench.latency's measurement, with an exact count check.

`bench.latency` already measures push-to-start of an idle worker on any
driver URL; this module runs the same measurement (same worker command, same
job, same pacing) for bench.compare and adds what every bench.compare
workload has: a count that must land exactly. Each job writes one line when
it starts, so the results file must end with exactly one line per pushed job
(the warm-up job included). A missing line is a lost job, a second line for
one job is a double start: either way the run is FAILED, never a number.
"""

from __future__ import annotations

import asyncio
import math
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from rainier_queue.drivers import scheme_of

from ..latency import (
    Skipped,
    cleanup,
    measure_cli,
    measure_in_process,
    percentile,
    probe,
)
from ..latency_jobs import OUT_ENV


def count_lines(path: Path) -> Counter[int]:
    """How many complete lines each seq has in the results file."""
    seen: Counter[int] = Counter()
    if not path.exists():
        return seen
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            seen[int(parts[0])] += 1
    return seen


def check_counts(seen: Counter[int], samples: int) -> str | None:
    """None if seq -1 (the warm-up) and 0..samples-1 each appear exactly once, else why not."""
    want = {-1, *range(samples)}
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


async def measure(url: str, rate: float, samples: int, settle: float = 0.5) -> dict[str, Any]:
    """One latency run on `url`: percentiles in ms, or ok=False with the reason."""
    in_process = scheme_of(url) == "memory"
    out: dict[str, Any] = {"ok": False, "expected": samples, "samples": 0}
    try:
        if not in_process:
            await probe(url)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "samples.txt"
            os.environ[OUT_ENV] = str(path)  # for the in-process worker
            run = measure_in_process if in_process else measure_cli
            found = await run(url, path, rate, samples)
            await asyncio.sleep(settle)  # a late double start shows up here
            problem = check_counts(count_lines(path), samples)
        values = sorted(ms for seq, ms in found.items() if seq >= 0)
        out["samples"] = len(values)
        out["p50_ms"] = round(percentile(values, 50), 3)
        out["p90_ms"] = round(percentile(values, 90), 3)
        out["p99_ms"] = round(percentile(values, 99), 3)
        out["max_ms"] = round(values[-1], 3) if values else math.nan
        if problem:
            out["error"] = problem
        else:
            out["ok"] = True
    except Skipped as exc:
        out["error"] = f"skipped: {exc}"
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        try:
            await cleanup(url)
        except Exception as exc:
            out.setdefault("note", f"could not clean up: {exc}")
    return out
