# SPDX-License-Identifier: MIT
"""`rainier-queue cancel` from one process against a job running in a CLI worker process.

The job is an `async def` handler that would run for two minutes: the cancel, a process
of its own, leaves a mark; the worker reads it within its `--pause-check`, cancels the
handler, and the job ends cancelled (acknowledged, never retried), which `job ID` shows.
A driver that cannot cancel refuses the command (exit 2, saying why).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob

from .harness import config, count, output, terminate, worker
from .test_pausing import cli, until

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]


@pytest.mark.timeout(300)
async def test_cancel_from_another_process_stops_a_job_running_in_a_cli_worker(
    tmp_path: Path, url: str
) -> None:
    conf = config(tmp_path, url)
    ledger = tmp_path / "ledger.db"
    queue = open_queue(url)
    try:
        cancellable = queue.capabilities.cancellable
        job = QueuedJob.create("lingering", {"n": 1}, max_attempts=3)
        if cancellable:
            await queue.push(job)
    finally:
        await queue.aclose()

    if not cancellable:
        refused = cli(conf, "cancel", job.id)
        assert refused.returncode == 2, refused.stderr
        assert "cannot cancel a job" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
        return

    proc = worker(conf, ledger, "--queue", "default", "--pause-check", "0.2s")
    try:
        await until(lambda: count(ledger, "start") == {1: 1}, "the job started", [proc])
        cancelled = cli(conf, "cancel", job.id)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "is marked cancelled" in cancelled.stdout
        await until(
            lambda: f"{job.id} cancelled while it ran" in output(proc),
            "the worker says it cancelled the job",
            [proc],
        )
        shown = cli(conf, "job", job.id)
        assert shown.returncode == 0, shown.stderr
        assert "cancelled" in shown.stdout
    finally:
        code = await terminate(proc)
    assert code == 0, output(proc)
    assert count(ledger, "cancelled") == {1: 1}, "the handler saw its cancellation"
    assert count(ledger, "finish") == {}, "it never ran to its end"
    assert count(ledger, "start") == {1: 1}, "and it was not retried"
