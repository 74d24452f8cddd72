# SPDX-License-Identifier: MIT
"""Run several CLI workers over one queue until it is empty, as a batch job would."""

from __future__ import annotations

from typing import Any

from ..cli.harness import PATIENCE, Cli, Result
from .catalog import QUEUE


def drain_with_workers(cli: Cli, *, workers: int, queue: str = QUEUE) -> list[Result]:
    """Start `workers` CLI workers with `--stop-when-empty` at once; what each said."""
    running = [
        cli.start("work", "--queue", queue, "--stop-when-empty", "--concurrency", "4")
        for _ in range(workers)
    ]
    results = []
    for process in running:
        out, err = process.communicate(timeout=PATIENCE)
        results.append(Result(process.returncode, out, err))
    return results


def failed_records(cli: Cli) -> list[dict[str, Any]]:
    """Every record in the failed store, through `rainier-queue failed --json`."""
    result = cli("failed", "--json", "--limit", "10000")
    assert result.code == 0, result.output
    records: list[dict[str, Any]] = result.json()
    return records
