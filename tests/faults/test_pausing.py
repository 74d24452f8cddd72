# SPDX-License-Identifier: MIT
"""`rainier-queue pause` and `resume` against real worker processes, on every shared driver.

A queue paused through the CLI before two CLI workers start: `size` marks it, both workers
say in their logs that they saw the pause, and nothing of it runs; `resume` through the CLI,
and both say so and every job runs once. A driver that cannot pause refuses the command
(exit 2, saying why) and stores nothing.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue

from ..contract.backends import Backend
from .harness import ROOT, config, count, each_finished_once, output, push_slow, terminate, worker

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]

JOBS = 12


@pytest.fixture
async def url(backend: Backend, tmp_path: Path) -> AsyncIterator[str]:
    namespace = "rqp" + uuid.uuid4().hex[:10]
    backend.setup(tmp_path, namespace, ["default", "second"])
    yield backend.url(tmp_path, namespace)
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


def cli(conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a `rainier-queue` command on the config's connection."""
    return subprocess.run(
        [sys.executable, "-m", "rainier_queue", "--config", str(conf), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def until(
    condition: Callable[[], bool], what: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Wait until `condition()` holds, every worker alive (a liveness bound, not a timing)."""
    deadline = time.monotonic() + 90
    while not condition():
        for proc in procs:
            assert proc.poll() is None, f"a worker exited: {output(proc)}"
        assert time.monotonic() < deadline, f"{what}: " + "\n---\n".join(map(output, procs))
        await asyncio.sleep(0.1)


@pytest.mark.timeout(300)
async def test_cli_workers_take_nothing_from_a_paused_queue_and_everything_once_resumed(
    tmp_path: Path, url: str
) -> None:
    conf = config(tmp_path, url)
    ledger = tmp_path / "ledger.db"
    queue = open_queue(url)
    pausable = queue.capabilities.pausable
    await queue.aclose()

    paused = cli(conf, "pause", "default")
    if not pausable:
        assert paused.returncode == 2, paused.stderr
        assert "cannot pause a queue" in paused.stderr, paused.stderr
        assert "Traceback" not in paused.stderr
        return
    assert paused.returncode == 0, paused.stderr
    assert "paused queue `default`" in paused.stdout

    await push_slow(url, range(JOBS))
    await push_slow(url, range(100, 100 + JOBS))
    sizes = cli(conf, "size", "default")
    assert sizes.returncode == 0, sizes.stderr
    assert "default (paused)" in sizes.stdout

    settings = ("--queue", "default,second", "--concurrency", "2", "--pause-check", "0.2s")
    procs = [worker(conf, ledger, *settings) for _ in range(2)]
    try:
        await until(
            lambda: all("queue `default` is paused" in output(p) for p in procs),
            "each worker says it saw the pause",
            procs,
        )
        assert count(ledger, "start") == {}, "nothing ran from the paused queue"

        resumed = cli(conf, "resume", "default")
        assert resumed.returncode == 0, resumed.stderr
        assert "resumed queue `default`" in resumed.stdout
        await until(
            lambda: len(count(ledger, "finish")) == 2 * JOBS, "every job ran once resumed", procs
        )
        await until(
            lambda: all("queue `default` is resumed" in output(p) for p in procs),
            "each worker says it saw the resume",
            procs,
        )
    finally:
        codes = [await terminate(proc) for proc in procs]
    assert codes == [0, 0], [output(p) for p in procs]
    each_finished_once(ledger, [*range(JOBS), *range(100, 100 + JOBS)])
