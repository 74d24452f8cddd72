# SPDX-License-Identifier: MIT
"""The latency workload for ours: bench.latency's measurement, with an exact count check.

`bench.latency` already measures push-to-start of an idle worker on any
driver URL; this module runs the same measurement (same worker command, same
job, same pacing) for bench.compare and adds what every bench.compare
workload has: a count that must land exactly (bench/compare/latency_check.py).
A lost job or a double start makes the run FAILED, never a number.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from rainier_queue.drivers import scheme_of

from ..latency import CONCURRENCY, Skipped, cleanup, measure_cli, measure_in_process, probe
from .latency_check import OUT_ENV, summary


async def measure(
    url: str, rate: float, samples: int, settle: float = 0.5, *, concurrency: int = CONCURRENCY
) -> dict[str, Any]:
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
            await run(url, path, rate, samples, concurrency=concurrency)
            await asyncio.sleep(settle)  # a late double start shows up here
            out.update(summary(path, samples))
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
