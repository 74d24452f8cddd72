# SPDX-License-Identifier: MIT
"""A backlog through several real worker processes: each job run once or failed, none lost.

The CLI's `work --stop-when-empty` in subprocesses, as a user deploys it, on
every driver of the contract suite with a `backlog` (jobs, processes); a
driver other processes cannot open (memory) is skipped with its reason.
The backlog test is the suite's longest (minutes on SQS, whose moto server
walks the queue on every call): alone in its file, it is handed to a test
process early instead of behind the other worker tests.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import FailedJobStore

from ..contract.backends import Backend
from .harness import config, count, events, output, push_all, worker

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]


async def never_ran(url: str, missing: set[int], procs: list[subprocess.Popen[bytes]]) -> str:
    """Why the backlog test failed: where the jobs that never started are, and what ran them."""
    queue = open_queue(url)
    try:
        assert isinstance(queue, FailedJobStore)
        failed = await queue.failed_jobs(limit=100_000)
        size = await queue.size("default")
    finally:
        await queue.aclose()
    fates = {f.job.payload["n"]: f.error.splitlines()[-1:] for f in failed}
    lines = [
        f"{len(missing)} job(s) never started: {sorted(missing)[:20]}",
        f"still queued: {size}",
        *(f"job {n} failed: {fates[n]}" for n in sorted(missing)[:20] if n in fates),
        *(f"--- worker {p.pid} (exit {p.returncode}) ---\n{output(p)[-3000:]}" for p in procs),
    ]
    return "\n".join(lines)


@pytest.mark.timeout(600)
@pytest.mark.needs("backlog")
async def test_a_backlog_through_several_worker_processes_runs_each_job_once_or_fails_it(
    tmp_path: Path, backend: Backend, url: str
) -> None:
    assert backend.backlog is not None
    total, processes = backend.backlog
    ledger = tmp_path / "ledger.db"
    await push_all(url, [QueuedJob.create("count", {"n": n}, max_attempts=1) for n in range(total)])

    conf = config(tmp_path, url)
    procs = [
        worker(conf, ledger, "--stop-when-empty", "--concurrency", "8") for _ in range(processes)
    ]
    codes = [await asyncio.to_thread(p.wait, 540) for p in procs]

    assert all(code in (0, 1) for code in codes), [output(p) for p in procs]
    starts = count(ledger, "start")
    failing = {n for n in range(total) if n % 97 == 0}
    if set(starts) != set(range(total)):
        pytest.fail(await never_ran(url, set(range(total)) - set(starts), procs))
    assert max(starts.values()) == 1, "no job was reserved twice"
    assert set(count(ledger, "finish")) == set(range(total)) - failing
    # At least two, so runs really overlapped; on a loaded machine a late process
    # can start after the others have drained the backlog, which is no fault.
    assert len({pid for *_, pid, _ in events(ledger)}) >= 2, "the processes shared the work"
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
        assert isinstance(queue, FailedJobStore)
        failed = await queue.failed_jobs(limit=total)
        assert sorted(f.job.payload["n"] for f in failed) == sorted(failing)
    finally:
        await queue.aclose()
