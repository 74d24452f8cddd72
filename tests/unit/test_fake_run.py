# SPDX-License-Identifier: MIT
"""Running what a fake manager recorded: `run_all()` and `run_all_sync()`.

A test of application code asks what a job does once dispatched, without a
broker or a worker: the recorded jobs run through the fake's registry, as a
worker would run them, with the jobs they dispatch in turn.
"""

from __future__ import annotations

import threading

import pytest

from rainier_queue import Dependencies, Job, JobContext, JobRegistry, QueueManager, Retry, job
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import JobError, UnknownJob
from rainier_queue.testing import NotFaking

seen: list[tuple[str, JobContext]] = []


class Greet(Job):
    name = "greet"
    queue = "emails"
    tries = 2
    who: str

    async def handle(self, ctx: JobContext) -> None:
        seen.append((self.who, ctx))


class Signup(Job):
    """Dispatches a greeting in turn, through the manager its context provides."""

    name = "signup"
    who: str

    async def handle(self, ctx: JobContext) -> None:
        seen.append((f"signup {self.who}", ctx))
        await ctx.resolve(QueueManager).dispatch(Greet(who=self.who))


class Echo(Job):
    """Dispatches itself again, for ever."""

    name = "echo"

    async def handle(self, ctx: JobContext) -> None:
        await ctx.resolve(QueueManager).dispatch(Echo())


class Flaky(Job):
    name = "flaky"
    tries = 3
    succeed_on: int

    async def handle(self, ctx: JobContext) -> None:
        seen.append(("flaky", ctx))
        if ctx.attempt != self.succeed_on:
            raise ValueError(f"attempt {ctx.attempt} failed")

    async def failed(self, ctx: JobContext, error: BaseException) -> None:
        seen.append((f"failed: {error}", ctx))


class Again(Job):
    name = "again"
    tries = 2

    async def handle(self, ctx: JobContext) -> None:
        raise Retry(delay=60, reason="not yet")


@job(name="thumbnail")
def thumbnail(ctx: JobContext, path: str) -> None:
    """A plain def: it runs in a thread and dispatches through the blocking facade."""
    seen.append((f"thumbnail {path} on {threading.current_thread().name}", ctx))
    ctx.resolve(QueueManager).blocking().dispatch(Greet(who=path))


REGISTRY = JobRegistry([Greet, Signup, Echo, Flaky, Again, thumbnail])


@pytest.fixture(autouse=True)
def nothing_seen() -> None:
    seen.clear()


async def test_recorded_jobs_run_in_dispatch_order_each_with_a_real_context() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    await fake.dispatch(Greet(who="ann"))
    await fake.pending(Greet(who="bob")).delay(3600).send()

    runs = await fake.run_all()

    assert [who for who, _ in seen] == ["ann", "bob"]
    ctx = seen[0][1]
    envelope = fake.all_pushed()[0]
    assert (ctx.job_id, ctx.name, ctx.queue) == (envelope.id, "greet", "emails")
    assert (ctx.attempt, ctx.max_attempts) == (1, 2)
    assert [(run.envelope.id, run.attempts, run.succeeded) for run in runs] == [
        (e.id, 1, True) for e in fake.all_pushed()
    ]
    fake.assert_pushed(Greet, times=2)  # running leaves the record as it was


async def test_jobs_a_handler_dispatches_run_in_the_same_call_after_those_waiting() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    dependencies = Dependencies([fake])
    await fake.dispatch_many([Signup(who="ann"), Greet(who="bob")])

    await fake.run_all(dependencies=dependencies)

    assert [who for who, _ in seen] == ["signup ann", "bob", "ann"]
    assert [e.name for e in fake.all_pushed()] == ["signup", "greet", "greet"]


async def test_each_recorded_job_runs_once_across_calls() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    await fake.dispatch(Greet(who="ann"))
    await fake.run_all()
    await fake.dispatch(Greet(who="bob"))

    assert len(await fake.run_all()) == 1
    assert await fake.run_all() == []
    assert [who for who, _ in seen] == ["ann", "bob"]


async def test_jobs_that_keep_dispatching_each_other_are_stopped_with_a_clear_error() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    dependencies = Dependencies([fake])
    await fake.dispatch(Echo())

    with pytest.raises(RuntimeError, match=r"ran 50 jobs and they keep dispatching more.*`echo`"):
        await fake.run_all(dependencies=dependencies, limit=50)


async def test_a_failing_job_uses_its_attempts_then_its_failed_hook_then_raises() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    await fake.dispatch_many([Flaky(succeed_on=0), Greet(who="after")])

    with pytest.raises(ValueError, match="attempt 3 failed"):
        await fake.run_all()

    assert [(what, ctx.attempt) for what, ctx in seen] == [
        ("flaky", 1),
        ("flaky", 2),
        ("flaky", 3),
        ("failed: attempt 3 failed", 3),
    ]
    seen.clear()
    await fake.run_all()  # the job after the failure waited for the next call
    assert [who for who, _ in seen] == ["after"]


async def test_a_job_that_succeeds_on_a_later_attempt_is_a_success() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    await fake.dispatch(Flaky(succeed_on=2))

    [run] = await fake.run_all()

    assert (run.attempts, run.succeeded) == (2, True)


async def test_without_raise_failures_each_failure_is_returned_and_the_run_goes_on() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    await fake.dispatch_many([Again(), Flaky(succeed_on=0), Greet(who="ann")])

    again, flaky, greet = await fake.run_all(raise_failures=False)

    assert isinstance(again.error, JobError)
    assert "asked to be retried (not yet) on its last attempt (2 of 2)" in str(again.error)
    assert isinstance(flaky.error, ValueError)
    assert (flaky.attempts, greet.succeeded) == (3, True)


async def test_a_job_missing_from_the_fakes_registry_says_how_to_register_it() -> None:
    fake = QueueManager.fake()
    await fake.dispatch(Greet(who="ann"))

    with pytest.raises(UnknownJob, match=r"fake manager's registry.*fake_queue_registry"):
        await fake.run_all()


def test_run_all_sync_runs_plain_def_handlers_that_dispatch_through_the_facade() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    dependencies = Dependencies([fake])
    fake.blocking().dispatch(thumbnail(path="a.png"))

    runs = fake.run_all_sync(dependencies=dependencies)

    assert [run.envelope.name for run in runs] == ["thumbnail", "greet"]
    assert seen[0][0].startswith("thumbnail a.png on ")
    assert "MainThread" not in seen[0][0]
    assert seen[1][0] == "a.png"
    fake.blocking().close()


async def test_run_all_sync_inside_an_event_loop_says_to_await_run_all() -> None:
    fake = QueueManager.fake(registry=REGISTRY)

    with pytest.raises(RuntimeError, match=r"await manager\.run_all\(\)"):
        fake.run_all_sync()


async def test_running_the_record_of_a_real_manager_fails_as_an_assertion_does() -> None:
    manager = QueueManager(MemoryQueue())

    with pytest.raises(NotFaking, match="needs a faking manager"):
        await manager.run_all()  # type: ignore[attr-defined]
