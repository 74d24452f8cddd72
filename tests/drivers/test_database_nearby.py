# SPDX-License-Identifier: MIT
"""The wake-ups between processes on one machine (SQLite, MySQL): `nearby.py`.

The contract suite checks the promise (a push from another process wakes
an idle worker whose poll is a minute away); these check what keeps it
safe: a socket left by a process killed with SIGKILL is removed and costs
nothing, a channel that cannot be used turns itself off with one warning
and the poll still finds the work, and many waiting processes are all
woken. Real processes and real sockets throughout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue.drivers import DriverContext, open_queue
from rainier_queue.drivers.database.nearby import SUFFIX, Rendezvous, folder_for
from rainier_queue.drivers.database.sqlite import SQLiteQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import ConfigurationError, UnknownOption

pytestmark = pytest.mark.skipif(
    not hasattr(os, "getuid"), reason="UNIX datagram sockets are a POSIX feature"
)

LONG = timedelta(minutes=5)
WITHIN = 30.0
"""Seconds something that happens at once may take on a loaded machine."""

WAIT_IN_ANOTHER_PROCESS = """
import asyncio, sys
from collections.abc import Iterator
from datetime import timedelta
from rainier_queue.drivers.database.sqlite import SQLiteQueue

async def main(path: str) -> None:
    queue = SQLiteQueue(path, poll_interval=timedelta(minutes=1))
    await queue.size("default")
    waiting = asyncio.ensure_future(queue.wait_for_work(["default"], timedelta(minutes=5)))
    await asyncio.sleep(0.2)
    print("waiting", flush=True)
    await waiting
    print("woken", flush=True)
    await queue.aclose()

asyncio.run(main(sys.argv[1]))
"""


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp folder with a short path (pytest's may leave no room for a socket's name)."""
    with tempfile.TemporaryDirectory(prefix="rqnb") as folder:
        yield Path(folder)


def folder_of(path: str) -> str:
    return folder_for(f"sqlite:{os.path.realpath(path)}")


def folder_exists(path: str) -> bool:
    return os.path.exists(folder_of(path))


def sockets(path: str) -> list[str]:
    folder = folder_of(path)
    try:
        return sorted(name for name in os.listdir(folder) if name.endswith(SUFFIX))
    except FileNotFoundError:
        return []


def a_waiter(path: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WAIT_IN_ANOTHER_PROCESS, path],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "waiting"
    return proc


async def test_every_waiting_process_is_woken_by_one_push(tmp_path: Path) -> None:
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    await queue.size("default")
    waiters = [await asyncio.to_thread(a_waiter, path) for _ in range(3)]
    try:
        assert len(sockets(path)) == 3
        await queue.push(QueuedJob.create("x", None))
        for proc in waiters:
            out, _ = await asyncio.to_thread(proc.communicate, timeout=WITHIN)
            assert out.strip() == "woken"
            assert proc.returncode == 0
    finally:
        for proc in waiters:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        await queue.aclose()
    assert sockets(path) == [], "each process removed its socket as it closed its queue"
    assert not folder_exists(path), "and the last one removed the folder"


async def test_a_socket_left_by_a_killed_process_is_removed_by_the_next_push(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    await queue.size("default")
    proc = await asyncio.to_thread(a_waiter, path)
    [left] = sockets(path)
    proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(proc.communicate)
    assert sockets(path) == [left], "nothing ran to remove it"
    try:
        await queue.push(QueuedJob.create("x", None))  # does not fail on it
        assert sockets(path) == []
        assert await queue.size("default") == 1
    finally:
        await queue.aclose()


async def test_a_channel_that_cannot_be_used_leaves_the_poll_with_one_warning(
    tmp_path: Path,
    short_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The user's folder is one that others may write to (say, made by someone else
    # in a shared temp dir): the channel refuses it, and nothing else changes.
    temp = short_tmp
    shared = temp / f"rainier-queue-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    path = str(tmp_path / "queue.db")
    waiting_queue = SQLiteQueue(path, poll_interval=timedelta(milliseconds=50))
    pushing_queue = SQLiteQueue(path)
    caplog.set_level(logging.WARNING, logger="rainier_queue.database")
    try:
        await waiting_queue.size("default")
        for _ in range(3):
            waiting = asyncio.create_task(waiting_queue.wait_for_work(["default"], LONG))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            await pushing_queue.push(QueuedJob.create("x", None))
            await asyncio.wait_for(waiting, WITHIN)  # the poll (or this process's signal)
            [reservation] = await waiting_queue.reserve("default")
            await waiting_queue.acknowledge(reservation)
    finally:
        await waiting_queue.aclose()
        await pushing_queue.aclose()
    warned = [r for r in caplog.records if "not woken at once" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert "others may write to it" in warned[0].getMessage()
    assert os.listdir(shared) == [], "nothing was made in a folder that is not private"


def test_a_rendezvous_wakes_another_process(short_tmp: Path) -> None:
    heard = threading.Event()
    listener = Rendezvous("the-database", heard.set, base=str(short_tmp))
    listener.join()
    listener.listen()
    try:
        assert listener.listening
        assert listener.off is None
        code = (
            "import sys; from rainier_queue.drivers.database.nearby import Rendezvous; "
            "Rendezvous('the-database', lambda: None, base=sys.argv[1]).signal()"
        )
        subprocess.run([sys.executable, "-c", code, str(short_tmp)], check=True, timeout=WITHIN)
        assert heard.wait(WITHIN)
    finally:
        listener.release()
    assert not os.path.exists(listener.folder), "the last release removes the socket and folder"


def test_a_path_too_long_for_a_socket_turns_the_channel_off(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    rendezvous = Rendezvous("the-database", lambda: None, base=str(deep))
    rendezvous.join()
    rendezvous.listen()  # does not raise
    assert not rendezvous.listening
    assert rendezvous.off is not None
    assert "longer than a socket path" in rendezvous.off
    rendezvous.signal()  # nor does this
    rendezvous.release()


async def test_with_local_wakeup_off_a_waiting_process_makes_no_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path, local_wakeup=False, poll_interval=timedelta(milliseconds=20))
    try:
        await queue.wait_for_work(["default"], timedelta(milliseconds=100))
        assert sockets(path) == []
        await queue.push(QueuedJob.create("x", None))  # and a push sends nothing
        await asyncio.wait_for(queue.wait_for_work(["default"], LONG), WITHIN)  # the poll
    finally:
        await queue.aclose()


@pytest.mark.parametrize("value", ["0s", "-1s"])
def test_the_poll_interval_must_be_longer_than_zero(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigurationError, match="poll_interval"):
        open_queue(f"sqlite:///{tmp_path / 'queue.db'}?poll_interval={value}", {}, DriverContext())


def test_a_misspelt_poll_interval_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(UnknownOption, match="poll_interval"):
        open_queue(f"sqlite:///{tmp_path / 'queue.db'}?poll_intervall=1s", {}, DriverContext())
