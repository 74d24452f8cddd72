# SPDX-License-Identifier: MIT
"""Ctrl-C on a real worker process, on every driver other processes can share.

A user stops a worker with Ctrl-C and expects three things: to be told the
stop has begun, that a job cut short goes back to the queue, and that a job
handed back is not also carried to its end by the process that gave it up
(its side effect would then happen twice). The jobs here are plain `def`
handlers, the hard case: Python cannot stop their threads. The worker
raises `HandlerInterrupted` in them, which ends a handler running Python
code; one blocked in a long call into C does not return, so its job is not
handed back (another worker would start it beside the thread): the process
exits without waiting for the thread, and the job's lease lapses.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import FailedJobStore

from ..contract.backends import BACKENDS, Backend
from .harness import config, count, events, output, push_slow, worker

SHARED = [name for name in BACKENDS if name not in ("memory", "redis-cluster", "kafka")]
PATIENCE = 60.0
"""Seconds to wait for something that should happen at once (a bound, not a timing test)."""
LONG_JOB = 45.0
"""Seconds the job would sleep: far past any wait of the test, so a finish means it ran on."""


@pytest.fixture(params=SHARED)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    backend: Backend = BACKENDS[str(request.param)]
    if backend.check is not None:
        backend.check()
    namespace = "rqc" + uuid.uuid4().hex[:10]
    yield backend.url(tmp_path, namespace)
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


async def until_printed(proc: subprocess.Popen[bytes], text: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while text not in output(proc):
        assert proc.poll() is None, output(proc)
        assert time.monotonic() < deadline, f"never printed {text!r}: {output(proc)}"
        await asyncio.sleep(0.05)


async def until_started(proc: subprocess.Popen[bytes], ledger: Path) -> None:
    deadline = time.monotonic() + PATIENCE
    while not count(ledger, "start"):
        assert proc.poll() is None, output(proc)
        assert time.monotonic() < deadline, f"the job never started: {output(proc)}"
        await asyncio.sleep(0.05)


async def push_naps(url: str) -> None:
    """One ledger `naps` job: plain `def`, in short sleeps, so an exception reaches it."""
    queue = open_queue(url)
    try:
        await queue.push(QueuedJob.create("naps", {"n": 1, "seconds": LONG_JOB}, max_attempts=5))
    finally:
        await queue.aclose()


async def assert_back_in_the_queue_once(url: str) -> None:
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 1, "the job waits for the next worker"
        assert isinstance(queue, FailedJobStore)
        assert await queue.failed_jobs() == []
    finally:
        await queue.aclose()


@pytest.mark.timeout(180)
async def test_a_second_ctrl_c_hands_the_running_job_back_and_the_process_does_not_finish_it(
    tmp_path: Path, url: str
) -> None:
    await push_naps(url)
    ledger = tmp_path / "ledger.db"
    proc = worker(config(tmp_path, url), ledger, "--sleep", "0.2s", "--grace", "1h")
    await until_started(proc, ledger)

    proc.send_signal(signal.SIGINT)
    await until_printed(proc, "received SIGINT")  # at the default level: the stop has begun
    proc.send_signal(signal.SIGINT)
    code = await asyncio.to_thread(proc.wait, PATIENCE)

    printed = output(proc)
    assert code == 130, printed
    assert "Traceback" not in printed
    assert "1 interrupted and handed back" in printed
    assert count(ledger, "finish") == {}, "the handed-back job was not also run to its end"
    await assert_back_in_the_queue_once(url)


@pytest.mark.timeout(180)
async def test_a_job_still_running_when_the_grace_period_ends_is_handed_back_not_finished(
    tmp_path: Path, url: str
) -> None:
    await push_naps(url)
    ledger = tmp_path / "ledger.db"
    proc = worker(config(tmp_path, url), ledger, "--sleep", "0.2s", "--grace", "1s")
    await until_started(proc, ledger)

    proc.send_signal(signal.SIGINT)
    code = await asyncio.to_thread(proc.wait, PATIENCE)

    printed = output(proc)
    assert code == 130, printed
    assert "received SIGINT" in printed
    assert "1 interrupted and handed back" in printed
    assert count(ledger, "finish") == {}, "the handed-back job was not also run to its end"
    await assert_back_in_the_queue_once(url)


@pytest.mark.timeout(180)
async def test_a_job_blocked_in_a_sleep_at_a_second_ctrl_c_is_left_to_its_lease_not_handed_back(
    tmp_path: Path, url: str
) -> None:
    await push_slow(url, [1], seconds=LONG_JOB)
    ledger = tmp_path / "ledger.db"
    # A short lease, so the job comes back within the test; the timeout must be shorter.
    conf = config(tmp_path, url, lease="6s")
    settings = ("--sleep", "0.2s", "--grace", "1h", "--timeout", "5s")
    proc = worker(conf, ledger, *settings)
    await until_started(proc, ledger)

    proc.send_signal(signal.SIGINT)
    await until_printed(proc, "received SIGINT")
    proc.send_signal(signal.SIGINT)
    code = await asyncio.to_thread(proc.wait, PATIENCE)

    printed = output(proc)
    assert code == 130, printed
    assert "Traceback" not in printed
    assert "1 left to their leases" in printed
    assert "Python cannot stop" in printed, "the user is told the thread could not be stopped"
    assert count(ledger, "finish") == {}, "the process did not run the job to its end"

    rescuer = worker(conf, ledger, *settings)
    try:
        deadline = time.monotonic() + PATIENCE
        while not any(e == "start" and attempt == 2 for _, _, attempt, _, e in events(ledger)):
            assert rescuer.poll() is None, output(rescuer)
            assert time.monotonic() < deadline, f"the job never came back: {output(rescuer)}"
            await asyncio.sleep(0.1)
    finally:
        rescuer.kill()
        await asyncio.to_thread(rescuer.wait, PATIENCE)
    starts = [(attempt, pid) for _, _, attempt, pid, e in events(ledger) if e == "start"]
    assert starts == [(1, proc.pid), (2, rescuer.pid)], "delivered again once its lease lapsed"


@pytest.mark.timeout(180)
async def test_a_job_that_ends_within_the_grace_period_is_recorded_once_and_the_worker_exits_0(
    tmp_path: Path, url: str
) -> None:
    await push_slow(url, [1], seconds=1.0)
    ledger = tmp_path / "ledger.db"
    proc = worker(config(tmp_path, url), ledger, "--sleep", "0.2s", "--grace", "1h")
    await until_started(proc, ledger)

    proc.send_signal(signal.SIGINT)
    code = await asyncio.to_thread(proc.wait, PATIENCE)

    printed = output(proc)
    assert code == 0, printed
    assert "received SIGINT" in printed
    assert count(ledger, "finish") == {1: 1}
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
    finally:
        await queue.aclose()
