# SPDX-License-Identifier: MIT
"""Entries another program left in storage, worked by CLI workers: on every driver that stores.

Our storage is not ours alone: a service in another language, a script, a
person at a console may write into it (docs/lifecycle.md, "Entries that are
not jobs"). The promise, as a batch job would see it: workers with
`--stop-when-empty` over well-formed jobs mixed with malformed entries all
exit 0 without a traceback, each job runs exactly once, each malformed entry
is listed by `failed --json` under `rainier-queue:not-a-job` with an error
naming what was wrong (the field, mostly), and the queue drains to nothing.

Each driver writes the entries as another program would through its `plant`
hook (backends.py): rows in its jobs table, bodies added to its stream,
records produced to its topic; tests/foreign/catalog.py holds what they
write, including what only one storage can hold (SQLite's loose typing, a
Kafka record without a value).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rainier_queue.queue import Migratable
from rainier_queue.stored import NOT_A_JOB

from ..cli.harness import PATIENCE, Cli, Result, no_traceback
from ..foreign.catalog import QUEUE
from .backends import Backend, Planted
from .conftest import OpenQueue

GOOD = 24
"""Well-formed jobs among the malformed entries: enough that every reserve batch meets some."""
WORKERS = 2


def interleaved(good: list[Planted], bad: list[Planted]) -> list[Planted]:
    """A malformed entry before each good one while they last, then the rest: every reserve
    batch meets some, at its start and in its middle."""
    mixed: list[Planted] = []
    for n, entry in enumerate(good):
        if n < len(bad):
            mixed.append(bad[n])
        mixed.append(entry)
    return mixed + bad[len(good) :]


def drain_with_workers(cli: Cli, workers: int) -> list[Result]:
    """Start `workers` CLI workers with `--stop-when-empty` at once; what each said."""
    running = [
        cli.start("work", "--queue", QUEUE, "--stop-when-empty", "--concurrency", "4")
        for _ in range(workers)
    ]
    results = []
    for process in running:
        out, err = process.communicate(timeout=PATIENCE)
        results.append(Result(process.returncode, out, err))
    return results


def failed_records(cli: Cli) -> list[dict[str, Any]]:
    """Every record in the failed store, as `rainier-queue failed --json` lists it."""
    result = cli("failed", "--json", "--limit", "10000")
    assert result.code == 0, result.output
    records: list[dict[str, Any]] = result.json()
    return records


@pytest.mark.needs("plant", "processes")
async def test_workers_run_each_good_entry_once_and_list_each_foreign_one_with_its_field(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    assert backend.plant is not None
    plant = backend.plant
    backend.setup(tmp_path, namespace, [QUEUE])
    queue = open_queue()
    if isinstance(queue, Migratable):
        await queue.migrate()
    await queue.size(QUEUE)  # connected, and the tables or topics exist
    ledger = tmp_path / "ledger.txt"
    good = plant.good(str(ledger), GOOD)
    bad = [(name, raw) for name, (raw, _) in plant.bad.items()]
    await plant.write(tmp_path, namespace, QUEUE, interleaved(good, bad))
    cli = Cli(backend.url(tmp_path, namespace))

    results = await asyncio.to_thread(drain_with_workers, cli, WORKERS)

    for result in results:
        assert result.code == 0, result.output
        assert no_traceback(result), result.output
    assert ledger.exists(), [r.output for r in results]
    ran = Counter(ledger.read_text(encoding="utf-8").split())
    assert ran == Counter(name for name, _ in good), "each well-formed entry runs exactly once"
    failed = await asyncio.to_thread(failed_records, cli)
    by_name = {plant.listed(record): record for record in failed}
    assert sorted(by_name, key=str) == sorted(plant.bad), "each malformed entry is listed once"
    assert len(failed) == len(plant.bad)
    for name, (_, says) in plant.bad.items():
        record = by_name[name]
        assert record["name"] == NOT_A_JOB
        assert record["queue"] == QUEUE
        assert says in record["error"], (name, record["error"])
    json.dumps(failed, ensure_ascii=False).encode("utf-8")  # the listing prints
    assert await asyncio.to_thread(cli.sizes, QUEUE) == {QUEUE: 0}
