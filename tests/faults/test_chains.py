# SPDX-License-Identifier: MIT
"""A chain loses no step when its worker dies between finishing one step and acknowledging
it, on every shared driver.

The worker pushes the next step before it acknowledges the finished one. A worker killed
in between leaves the finished step unacknowledged (it runs again once its lease lapses,
pushing the next step again) and the next step queued: every step then runs at least
once, each after the one before it finished.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rainier_queue import QueueManager, chain
from rainier_queue.connections import open_queue

from .harness import ROOT, config, events, output, terminate, worker
from .ledger_jobs import Slow
from .ledger_jobs import ledger as open_ledger

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]

LEASE = "2s"


@pytest.mark.timeout(300)
async def test_a_worker_killed_between_a_step_and_its_acknowledgement_loses_no_step(
    tmp_path: Path, url: str
) -> None:
    ledger = tmp_path / "ledger.db"
    open_ledger(str(ledger)).close()
    queue = open_queue(url)
    try:
        steps = [Slow(n=n, seconds=0.01) for n in (1, 2, 3)]
        await chain(*steps).dispatch(QueueManager(queue))
    finally:
        await queue.aclose()

    dying = _dying_worker(url, ledger)
    died = await asyncio.to_thread(dying.wait, 120)
    printed = (tmp_path / "dying.log").read_text(errors="replace")
    assert died == 9, f"the worker should die right after pushing step 2:\n{printed}"
    died_with = [(n, e) for _, n, _, _, e in events(ledger)]
    # A worker whose reserve is already waiting (a long poll, a consumer) may be handed
    # step 2 and start it in the instant before its push's answer comes back and it dies.
    assert died_with in (
        [(1, "start"), (1, "finish")],
        [(1, "start"), (1, "finish"), (2, "start")],
    )

    settings = ("--sleep", "0.2s", "--timeout", "1.5s")
    rescuer = worker(config(tmp_path, url, lease=LEASE), ledger, *settings)
    try:
        deadline = time.monotonic() + 150
        while not any(n == 3 and e == "finish" for _, n, _, _, e in events(ledger)):
            assert rescuer.poll() is None, output(rescuer)
            assert time.monotonic() < deadline, f"the chain did not finish: {output(rescuer)}"
            await asyncio.sleep(0.1)
        # Step 1 comes back after its lease and pushes step 2 again: let that one run too.
        while sum(1 for _, n, _, _, e in events(ledger) if n == 1 and e == "finish") < 2:
            assert time.monotonic() < deadline, f"step 1 never ran again: {output(rescuer)}"
            await asyncio.sleep(0.1)
    finally:
        assert await terminate(rescuer) == 0, output(rescuer)

    runs = [(n, e) for _, n, _, _, e in events(ledger)]
    for n in (1, 2, 3):
        assert (n, "finish") in runs, f"step {n} never finished: {runs}"
    for before, after in ((1, 2), (2, 3)):
        first_start = runs.index((after, "start"))
        assert (before, "finish") in runs[:first_start], f"step {after} ran before {before}"


def _dying_worker(url: str, ledger: Path) -> subprocess.Popen[bytes]:
    """`dying_chain_worker` in a process of its own, writing its runs to `ledger` and what
    it prints to `dying.log` beside it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAINIER_QUEUE_TEST_LEDGER": str(ledger)}
    with (ledger.parent / "dying.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.faults.dying_chain_worker", url, LEASE],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
