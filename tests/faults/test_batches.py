# SPDX-License-Identifier: MIT
"""A batch's callback is queued exactly once though a worker dies in the middle of it, or
right after recording the batch's last job, on every driver that keeps batches.

Three `rainier-queue work` processes share a batch of 10,000 jobs; one is SIGKILLed while
the batch is about a third done, with jobs in its hands (some finished and recorded in the
batch but not acknowledged: they run again, and their second record changes nothing). The
jobs it held come back when their leases lapse and the other two finish them. The ledger
must then show the batch's `then` run once, told that all 10,000 succeeded, and its
`catch` never.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rainier_queue import QueueManager, batch
from rainier_queue.batchstate import repeats_dropped_within
from rainier_queue.connections import open_queue

from ..contract.backends import Backend
from .harness import ROOT, config, count, events, output, terminate, worker
from .ledger_jobs import BatchDone, Tally
from .ledger_jobs import ledger as open_ledger

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes", "batches")]

TOTAL = 10_000
"""Jobs in the killed-worker batch, or the backend's backlog if smaller (SQS FIFO's 5,000
on moto, whose calls walk the whole queue)."""
LEASE = "2s"


@pytest.mark.timeout(900)
@pytest.mark.needs("shared_backlog")
async def test_a_batch_across_three_workers_one_killed_fires_its_then_exactly_once(
    tmp_path: Path, url: str, backend: Backend
) -> None:
    total = min(TOTAL, backend.backlog[0]) if backend.backlog else TOTAL
    queue = open_queue(url)
    try:
        assert queue.capabilities.batches, "a backend that keeps none says why in `lacks`"
        batch_id = await (
            batch([Tally(n=n) for n in range(total)])
            .then(BatchDone(kind="then"))
            .catch(BatchDone(kind="catch"))
            .dispatch(QueueManager(queue))
        )
    finally:
        await queue.aclose()
    conf = config(tmp_path, url, lease=LEASE)
    ledger = tmp_path / "ledger.db"
    settings = ("--concurrency", "8", "--timeout", "1.5s", "--sleep", "0.2s")
    workers = [worker(conf, ledger, *settings) for _ in range(3)]
    doomed, *rescuers = workers
    try:
        deadline = time.monotonic() + 300
        while sum(1 for *_, pid, e in events(ledger) if pid == doomed.pid) < total // 10:
            assert time.monotonic() < deadline, f"the batch never got going: {output(doomed)}"
            assert doomed.poll() is None, output(doomed)
            await asyncio.sleep(0.05)
        os.kill(doomed.pid, signal.SIGKILL)
        await asyncio.to_thread(doomed.wait)
        finished_then = len(count(ledger, "finish"))
        assert finished_then < total, "the kill should land before the batch is done"

        deadline = time.monotonic() + 600
        while not _callbacks(ledger):
            assert time.monotonic() < deadline, "the batch never finished: " + "\n".join(
                output(r)[-2000:] for r in rescuers
            )
            for rescuer in rescuers:
                assert rescuer.poll() is None, output(rescuer)
            await asyncio.sleep(0.2)
        # Anything left to run (a rerun of a job the dead worker held) runs before the check.
        queue = open_queue(url)
        try:
            while await queue.size("default"):
                assert time.monotonic() < deadline, "jobs are left on the queue"
                await asyncio.sleep(0.2)
            progress = await QueueManager(queue).batch(batch_id)
        finally:
            await queue.aclose()
    finally:
        for rescuer in rescuers:
            if rescuer.poll() is None:
                assert await terminate(rescuer) == 0, output(rescuer)

    assert set(count(ledger, "finish")) == set(range(total)), "every job of the batch ran"
    assert _callbacks(ledger) == [(total, f"then:{total}:0:0")], "then, once, with the counts"
    assert (progress.succeeded, progress.failed, progress.finished) == (total, 0, True)


@pytest.mark.timeout(300)
async def test_a_worker_killed_between_recording_the_last_job_and_settling_it_loses_nothing(
    tmp_path: Path, url: str
) -> None:
    # The record that finds the batch finished queues its callbacks in the same write; the
    # worker dies before acknowledging the job, which runs again elsewhere and is recorded
    # again, changing nothing: the callback runs once.
    queue = open_queue(url)
    try:
        assert queue.capabilities.batches, "a backend that keeps none says why in `lacks`"
        await (
            batch([Tally(n=n) for n in range(3)])
            .then(BatchDone(kind="then"))
            .catch(BatchDone(kind="catch"))
            .dispatch(QueueManager(queue))
        )
    finally:
        await queue.aclose()
    ledger = tmp_path / "ledger.db"
    open_ledger(str(ledger)).close()

    dying = _dying_worker(url, ledger)
    died = await asyncio.to_thread(dying.wait, 120)
    printed = (tmp_path / "dying.log").read_text(errors="replace")
    assert died == 9, f"the worker should die right after recording the last job:\n{printed}"
    assert set(count(ledger, "finish")) == {0, 1, 2}

    settings = ("--sleep", "0.2s", "--timeout", "1.5s")
    rescuer = worker(config(tmp_path, url, lease=LEASE), ledger, *settings)
    try:
        deadline = time.monotonic() + 150
        while not (_callbacks(ledger) and max(count(ledger, "finish").values()) >= 2):
            assert rescuer.poll() is None, output(rescuer)
            assert time.monotonic() < deadline, f"nothing ran again: {output(rescuer)}"
            await asyncio.sleep(0.1)
        queue = open_queue(url)
        try:
            while await queue.size("default"):
                assert time.monotonic() < deadline, "jobs are left on the queue"
                await asyncio.sleep(0.1)
        finally:
            await queue.aclose()
    finally:
        assert await terminate(rescuer) == 0, output(rescuer)

    # The dying worker may have taken the callback too, in the instant before it died (a
    # reserve already in flight): then it is delivered again, as a later attempt of the same
    # job, and may run again. Queued twice, two copies would each run as their own attempt 1.
    runs = [(job_id, attempt, e) for job_id, _, attempt, _, e in events(ledger) if ":" in e]
    assert {e for _, _, e in runs} == {"then:3:0:0"}, "then, with the counts; never catch"
    assert len({job_id for job_id, _, _ in runs}) == 1
    attempts = [attempt for _, attempt, _ in runs]
    assert len(set(attempts)) == len(attempts), f"queued once, each run a later delivery: {runs}"


@pytest.mark.timeout(300)
@pytest.mark.needs("dedup_outlives_delete")
async def test_a_worker_killed_after_producing_the_callbacks_runs_them_at_least_once(
    tmp_path: Path, url: str
) -> None:
    # Where a batch is counted in a lock store and its callbacks go to a broker (Kafka), the
    # finishing job's worker dies after producing them and before marking them produced.
    # The job runs again and produces them again, under the same id: the counts stay exact,
    # the `then` runs with them (twice, as two copies of one job id), and `catch` never.
    # Where the broker drops a push repeated under its id within a window (NATS), the rerun
    # (a lease of 2 s later, well within the 2 minutes) is dropped and `then` runs once;
    # tests/drivers/test_nats_batches.py publishes again after the window.
    queue = open_queue(url)
    try:
        if queue.capabilities.batch_callbacks_exactly_once:
            pytest.skip(f"{queue.name} queues the callbacks in the write that counts the last job")
        copies = 1 if repeats_dropped_within(queue) else 2
        batch_id = await (
            batch([Tally(n=n) for n in range(3)])
            .then(BatchDone(kind="then"))
            .catch(BatchDone(kind="catch"))
            .dispatch(QueueManager(queue))
        )
    finally:
        await queue.aclose()
    ledger = tmp_path / "ledger.db"
    open_ledger(str(ledger)).close()

    dying = _dying_worker(url, ledger, "produced")
    died = await asyncio.to_thread(dying.wait, 120)
    printed = (tmp_path / "dying.log").read_text(errors="replace")
    assert died == 9, f"the worker should die right after producing the callbacks:\n{printed}"

    settings = ("--sleep", "0.2s", "--timeout", "1.5s")
    rescuer = worker(config(tmp_path, url, lease=LEASE), ledger, *settings)
    try:
        deadline = time.monotonic() + 150
        queue = open_queue(url)
        try:
            while True:
                assert rescuer.poll() is None, output(rescuer)
                assert time.monotonic() < deadline, f"the batch never finished: {output(rescuer)}"
                progress = await QueueManager(queue).batch(batch_id)
                if progress.finished and _callbacks(ledger) and not await queue.size("default"):
                    break
                await asyncio.sleep(0.1)
        finally:
            await queue.aclose()
    finally:
        assert await terminate(rescuer) == 0, output(rescuer)

    assert (progress.succeeded, progress.failed, progress.pending) == (3, 0, 0)
    runs = [(job_id, e) for job_id, _, _, _, e in events(ledger) if ":" in e]
    assert {e for _, e in runs} == {"then:3:0:0"}, "then, with the counts; never catch"
    assert {job_id for job_id, _ in runs} == {f"{batch_id}.then"}, "every copy under one id"
    # Each run with its attempt, and the rescuer's log, so a failure tells a copy produced a
    # third time from a copy that ran twice (its handler past the 1.5 s limit on a loaded
    # machine, say, which the log would show as a timeout).
    attempts = [(attempt, e) for _, _, attempt, _, e in events(ledger) if ":" in e]
    told = f"{attempts}\nthe rescuer printed:\n{output(rescuer)}"
    if copies == 2:
        assert len(runs) == 2, f"produced again by the rerun, and both copies ran: {told}"
    else:
        assert len(runs) == 1, f"the rerun's push was dropped as a repeat of the first: {told}"


def _dying_worker(url: str, ledger: Path, gap: str = "recorded") -> subprocess.Popen[bytes]:
    """`dying_batch_worker` in a process of its own, dying in `gap`, writing its runs to
    `ledger` and what it prints to `dying.log` beside it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAINIER_QUEUE_TEST_LEDGER": str(ledger)}
    with (ledger.parent / "dying.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.faults.dying_batch_worker", url, LEASE, gap],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _callbacks(ledger: Path) -> list[tuple[int, str]]:
    """The rows the batch's callbacks wrote: (total, `kind:succeeded:failed:cancelled`)."""
    return [(n, e) for _, n, _, _, e in events(ledger) if ":" in e]
