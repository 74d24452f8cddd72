# SPDX-License-Identifier: MIT
"""The fake is a driver: a recording queue behind the port, and a pytest fixture over it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rainier_queue import Job, JobContext, LockManager, QueueManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.recording import RecordingQueue
from rainier_queue.envelope import QueuedJob

pytest_plugins = ["pytester"]


class Welcome(Job):
    name = "welcome"
    queue = "emails"
    user_id: int

    def unique_id(self) -> str | None:
        return str(self.user_id)

    async def handle(self, ctx: JobContext) -> None:
        pass


class Report(Job):
    name = "report"
    day: str

    async def handle(self, ctx: JobContext) -> None:
        pass


async def test_a_recording_queue_keeps_pushes_in_order_and_delivers_nothing() -> None:
    queue = RecordingQueue()
    first, second = QueuedJob.create("a", 1), QueuedJob.create("b", 2, queue="slow")

    assert await queue.push(first) == first.id
    assert await queue.push_many([second]) == [second.id]

    assert queue.pushed == [first, second]
    assert await queue.reserve("default") == []
    assert await queue.size("slow") == 1
    assert await queue.clear("slow") == 1
    assert queue.pushed == [first]


async def test_the_fake_is_a_manager_over_one_recording_queue_for_every_connection() -> None:
    fake = QueueManager.fake(connections=["bulk"])

    await fake.pending(Report(day="mon")).on_connection("bulk").send()
    await fake.dispatch_many([Report(day="tue"), Welcome(user_id=1)])

    assert isinstance(fake.queue, RecordingQueue)
    assert fake.connection("bulk") is fake.queue
    assert fake.is_faking
    assert [e.name for e in fake.all_pushed()] == ["report", "report", "welcome"]
    assert [e.payload for e in fake.pushed_envelopes(Report)] == [{"day": "mon"}, {"day": "tue"}]


async def test_the_fake_walks_the_real_dispatch_path_so_a_duplicate_unique_job_is_dropped() -> None:
    fake = QueueManager.fake(locks=LockManager(MemoryCache()))

    assert await fake.dispatch(Welcome(user_id=3)) is not None
    assert await fake.dispatch(Welcome(user_id=3)) is None
    assert (await fake.dispatch_many([Welcome(user_id=3)])) == [None]

    fake.assert_pushed(Welcome, times=1)
    [envelope] = fake.pushed_envelopes(Welcome)
    assert envelope.unique_key == "unique:welcome:3"


async def test_a_real_manager_records_nothing_and_has_no_recording_branch() -> None:
    queue = RecordingQueue()
    manager = QueueManager(queue)  # an ordinary manager; the queue is only a driver

    await manager.dispatch(Report(day="wed"))

    assert not manager.is_faking
    assert [e.name for e in queue.pushed] == ["report"]
    with pytest.raises(AssertionError, match="needs a faking manager"):
        manager.assert_pushed(Report)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="dispach"):
        manager.dispach  # type: ignore[attr-defined]  # noqa: B018
    # Asking whether it has an assertion is a question, not an assertion: no error.
    assert not hasattr(manager, "assert_pushed")
    assert getattr(manager, "assert_nothing_pushed", None) is None


APPLICATION_TESTS = """
import asyncio

import pytest

from rainier_queue import Job, JobContext


class Welcome(Job):
    name = "welcome"
    user_id: int

    async def handle(self, ctx: JobContext) -> None:
        pass


async def signup(manager, user_id):
    await manager.dispatch(Welcome(user_id=user_id))
    await manager.pending(Welcome(user_id=user_id)).on_connection("bulk").send()


@pytest.fixture
def fake_queue_connections():
    return ["bulk"]


def test_signing_up_dispatches_a_welcome(fake_queue_manager):
    asyncio.run(signup(fake_queue_manager, 7))
    fake_queue_manager.assert_pushed(Welcome, times=2, where=lambda job: job.user_id == 7)


def test_each_test_gets_a_fresh_record(fake_queue_manager):
    fake_queue_manager.assert_nothing_pushed()


def test_a_failing_assertion_fails_the_test(fake_queue_manager):
    fake_queue_manager.assert_pushed(Welcome)
"""


def test_the_pytest_plugin_gives_application_tests_a_faked_manager(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_app=APPLICATION_TESTS)

    # A subprocess, so the plugin is found as an application's pytest finds it:
    # through the installed entry point, with nothing named on the command line.
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")

    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*expected job `welcome` to be pushed*pushed: nothing*"])


def test_dispatching_code_never_loads_the_fake_until_a_test_asks_for_one() -> None:
    program = (
        "import sys\n"
        "from rainier_queue import QueueManager\n"
        "from rainier_queue.drivers.memory import MemoryQueue\n"
        "QueueManager(MemoryQueue())\n"
        "assert 'rainier_queue.testing' not in sys.modules, 'the manager loaded testing.py'\n"
        "fake = QueueManager.fake()\n"
        "assert type(fake).__module__ == 'rainier_queue.testing', type(fake)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


USER_APP = """
from rainier_queue import JobContext, JobRegistry, job

outbox = []


@job(name="send-welcome")
def send_welcome(ctx: JobContext, email: str) -> None:
    outbox.append(email)


registry = JobRegistry([send_welcome])


def signup_view(queue, email):
    # A Django or Flask view: no event loop, so it dispatches through the blocking facade.
    queue.dispatch(send_welcome(email=email))


async def signup(manager, email):
    await manager.dispatch(send_welcome(email=email))
"""

USER_TESTS = """
import pytest

from myapp import outbox, registry, send_welcome, signup, signup_view


@pytest.fixture
def fake_queue_registry():
    return registry


@pytest.fixture(autouse=True)
def empty_outbox():
    outbox.clear()


def test_signing_up_sends_a_welcome(fake_queue_manager):
    signup_view(fake_queue_manager.blocking(), email="a@b.c")
    fake_queue_manager.assert_pushed(send_welcome, times=1)
    fake_queue_manager.run_all_sync()
    assert outbox == ["a@b.c"]


async def test_signing_up_sends_a_welcome_async(fake_queue_manager):
    await signup(fake_queue_manager, email="a@b.c")
    fake_queue_manager.assert_pushed(send_welcome, times=1)
    await fake_queue_manager.run_all()
    assert outbox == ["a@b.c"]
"""


def test_the_plugins_sync_and_async_examples_run_recorded_jobs_as_written(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(myapp=USER_APP, test_signup=USER_TESTS)
    # The settings the plugin's docstring tells an application to add for async tests.
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )

    # In a subprocess, as an application's own pytest runs them: the plugin and
    # pytest-asyncio found through their entry points, nothing named on the command line.
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-W", "error")

    result.assert_outcomes(passed=2)
