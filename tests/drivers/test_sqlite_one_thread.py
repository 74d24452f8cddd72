# SPDX-License-Identifier: MIT
"""The SQLite connection's thread keeps what the executor it replaced promised.

Calls run one at a time in the order made; a call whose caller gave up still
runs to its end (a transaction is never cut in half); and a program that
never closes its queue still exits, after the calls it made have run.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rainier_queue.drivers.database.sqlite.one_thread import OneThread


async def test_calls_run_in_the_order_they_were_made_on_one_thread() -> None:
    runner = OneThread("test-one-thread")
    seen: list[tuple[int, int | None]] = []

    def note(n: int) -> int:
        seen.append((n, threading.get_ident()))
        return n * 2

    try:
        results = await asyncio.gather(*(runner.submit(note, n) for n in range(50)))
    finally:
        runner.stop()
        runner.join()

    assert results == [n * 2 for n in range(50)]
    assert [n for n, _ in seen] == list(range(50))
    assert len({ident for _, ident in seen}) == 1
    assert seen[0][1] != threading.get_ident()


async def test_a_call_raises_in_its_caller() -> None:
    runner = OneThread("test-one-thread")

    def refuse(_: None) -> None:
        raise ValueError("no")

    try:
        with pytest.raises(ValueError, match="^no$"):
            await runner.submit(refuse, None)
    finally:
        runner.stop()
        runner.join()


async def test_a_call_whose_caller_was_cancelled_still_runs_to_its_end() -> None:
    runner = OneThread("test-one-thread")
    finished = threading.Event()

    def slow(_: None) -> None:
        time.sleep(0.2)
        finished.set()

    waiting = asyncio.ensure_future(runner.submit(slow, None))
    await asyncio.sleep(0.05)
    waiting.cancel()
    try:
        await asyncio.to_thread(finished.wait, 5)
    finally:
        runner.stop()
        runner.join()

    assert finished.is_set()
    assert waiting.cancelled()


def test_a_program_that_never_closes_its_queue_exits_after_its_calls_ran(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    program = f"""
import asyncio, time
from pathlib import Path
from rainier_queue.drivers.database.sqlite.one_thread import OneThread

def slow(_):
    time.sleep(0.3)
    Path({str(marker)!r}).write_text("yes")

async def main():
    runner = OneThread("left-open")
    runner.submit(slow, None)  # made, never awaited, never stopped

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30, check=False
    )

    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "yes", "the interpreter exited before the call it was given ran"
