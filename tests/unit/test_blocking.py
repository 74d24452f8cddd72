# SPDX-License-Identifier: MIT
"""The blocking facade's edges: one per manager, refused where it cannot work, closed at exit.

The many-threads test on every driver is in tests/contract/test_blocking.py;
these pin down what a web application meets around it: the same facade from
every thread, a clear error after close, inside an event loop and across a
fork, a call cut short by close reported as "may be queued", and a program
that never closes its facade ending without asyncio's complaints.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from rainier_queue import Job, JobContext, QueueManager
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import OutcomeUnknown

from ..postgres import PG_URL, drop_prefixed, require_postgres


class Report(Job):
    name = "report"
    day: str

    async def handle(self, ctx: JobContext) -> None:
        pass


def test_every_thread_gets_the_managers_one_blocking_facade() -> None:
    manager = QueueManager(MemoryQueue())
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(manager.blocking())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(seen) == 8
    assert all(facade is manager.blocking() for facade in seen)
    manager.blocking().close()


def test_a_blocking_call_after_close_is_refused_and_sends_nothing() -> None:
    queue = MemoryQueue()
    manager = QueueManager(queue)
    with manager.blocking() as facade:
        facade.dispatch(Report(day="mon"))

    with pytest.raises(RuntimeError, match=r"facade is closed .* nothing was sent"):
        manager.blocking().dispatch(Report(day="tue"))
    assert manager.blocking().closed
    manager.blocking().close()  # a second close does nothing


async def test_a_blocking_dispatch_inside_an_event_loop_is_refused_and_names_the_await() -> None:
    manager = QueueManager(MemoryQueue())

    with pytest.raises(RuntimeError, match=r"inside a running event loop.*await manager\.dispatch"):
        manager.blocking().dispatch(Report(day="mon"))

    assert await manager.queue.size("default") == 0
    manager.blocking().close()


class AnswerNeverComes(MemoryQueue):
    """Stores each pushed job, then waits for ever: a push whose answer is lost."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: list[str] = []
        self.pushing = threading.Event()

    async def push(self, job: QueuedJob) -> str:
        await super().push(job)
        self.stored.append(job.id)
        self.pushing.set()
        await asyncio.Event().wait()
        return job.id


def test_a_dispatch_cut_short_by_close_says_the_job_may_be_queued() -> None:
    queue = AnswerNeverComes()
    manager = QueueManager(queue)
    outcome: list[BaseException] = []

    def request() -> None:
        try:
            manager.blocking().dispatch(Report(day="mon"))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=request)
    thread.start()
    assert queue.pushing.wait(30)
    manager.blocking().close(timeout=0.2)
    thread.join(30)

    assert len(queue.stored) == 1
    assert [type(error) for error in outcome] == [OutcomeUnknown]
    assert "may or may not have been queued" in str(outcome[0])


APP = """
import os, sys
from rainier_queue import Job, JobContext, JobRegistry, QueueConfig

class Hello(Job):
    name = "hello"
    n: int

    async def handle(self, ctx: JobContext) -> None:
        pass

manager = QueueConfig.from_url(sys.argv[1]).build(JobRegistry([Hello]))
"""


def run_app(tmp_path: Path, body: str, url: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "app.py"
    script.write_text(APP + textwrap.dedent(body), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-X", "dev", str(script), url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_program_that_never_closes_its_facade_exits_without_asyncio_complaints(
    tmp_path: Path,
) -> None:
    require_postgres()
    prefix = "rq" + uuid.uuid4().hex[:10] + "_"
    try:
        done = run_app(
            tmp_path,
            """
            for n in range(3):
                manager.blocking().dispatch(Hello(n=n))
            print(manager.blocking().size("default"))
            """,
            f"{PG_URL}?prefix={prefix}",
        )
    finally:
        asyncio.run(drop_prefixed(prefix))

    assert (done.returncode, done.stdout, done.stderr) == (0, "3\n", "")


FORK = """
facade = manager.blocking()
if "{when}" == "used before the fork":
    facade.dispatch(Hello(n=0))
child = os.fork()
if child == 0:
    try:
        facade.dispatch(Hello(n=1))
        print("child: sent", flush=True)
    except RuntimeError as exc:
        print("child:", exc, flush=True)
    sys.exit(0)
os.waitpid(child, 0)
print("parent: size", facade.size("default"), flush=True)
"""


def test_a_facade_used_before_a_fork_is_refused_in_the_child(tmp_path: Path) -> None:
    done = run_app(
        tmp_path, FORK.format(when="used before the fork"), f"sqlite:///{tmp_path / 'jobs.db'}"
    )

    assert done.returncode == 0, done.stderr
    child, parent = done.stdout.splitlines()
    assert "was used in process" in child
    assert "before this process was forked" in child
    assert "nothing was sent" in child
    assert parent == "parent: size 1"


def test_a_facade_built_but_not_used_before_a_fork_works_in_the_child(tmp_path: Path) -> None:
    done = run_app(tmp_path, FORK.format(when="never"), f"sqlite:///{tmp_path / 'jobs.db'}")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child: sent", "parent: size 1"]
    assert done.stderr == ""
