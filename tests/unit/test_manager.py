# SPDX-License-Identifier: MIT
"""Dispatch: connections, the builder, unique jobs, the fake and the blocking facade."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from rainier_queue import (
    Job,
    JobContext,
    JobRegistry,
    LockManager,
    QueuedJob,
    QueueManager,
    UnknownConnection,
)
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.drivers.inline import InlineQueue
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import BrokerUnavailable, NotReplicated, OutcomeUnknown


class Welcome(Job):
    name = "welcome"
    queue = "emails"
    tries = 4
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


def a_manager(**kwargs: object) -> tuple[QueueManager, MemoryQueue]:
    queue = MemoryQueue()
    return QueueManager(queue, locks=LockManager(MemoryCache()), **kwargs), queue  # type: ignore[arg-type]


async def test_dispatch_pushes_an_envelope_built_from_the_job() -> None:
    manager, queue = a_manager()

    job_id = await manager.dispatch(Welcome(user_id=1))

    [reservation] = await queue.reserve("emails")
    assert reservation.job.id == job_id
    assert reservation.job.payload == {"user_id": 1}
    assert reservation.job.max_attempts == 4
    assert reservation.job.unique_key == "unique:welcome:1"


async def test_the_builder_overrides_queue_delay_tries_and_headers() -> None:
    manager, queue = a_manager()

    await (
        manager.pending(Report(day="mon"))
        .on_queue("slow")
        .delay(60)
        .tries(9)
        .with_headers({"traceparent": "t"})
        .send()
    )

    assert await queue.reserve("slow") == [], "delayed a minute"
    assert await queue.size("slow") == 1
    [waiting] = queue._lanes["slow"].delayed
    envelope: QueuedJob = waiting[2]
    assert envelope.max_attempts == 9
    assert envelope.headers == {"traceparent": "t"}
    assert envelope.available_at - envelope.created_at == timedelta(seconds=60)


async def test_an_undeclared_connection_is_an_error_and_never_the_default() -> None:
    manager, queue = a_manager(connections={"bulk": MemoryQueue()})

    with pytest.raises(UnknownConnection, match=r"`nope`.*`bulk`, `default`"):
        await manager.pending(Welcome(user_id=1)).on_connection("nope").send()

    assert await queue.size("emails") == 0
    assert not await manager.locks.is_held("unique:welcome:1")  # type: ignore[union-attr]


async def test_a_named_connection_gets_the_job_and_the_default_does_not() -> None:
    bulk = MemoryQueue()
    manager, default = a_manager(connections={"bulk": bulk})

    await manager.pending(Report(day="tue")).on_connection("bulk").send()

    assert await bulk.size("default") == 1
    assert await default.size("default") == 0


async def test_a_duplicate_unique_job_is_dropped_and_reported_as_none() -> None:
    manager, queue = a_manager()

    first = await manager.dispatch(Welcome(user_id=5))
    second = await manager.dispatch(Welcome(user_id=5))
    other = await manager.dispatch(Welcome(user_id=6))

    assert first is not None
    assert second is None
    assert other is not None
    assert await queue.size("emails") == 2


class BrokenQueue(MemoryQueue):
    async def push(self, job: QueuedJob) -> str:
        raise BrokerUnavailable("down")


async def test_a_push_that_fails_gives_the_uniqueness_lock_back() -> None:
    locks = LockManager(MemoryCache())
    manager = QueueManager(BrokenQueue(), locks=locks)

    with pytest.raises(BrokerUnavailable):
        await manager.dispatch(Welcome(user_id=9))

    assert not await locks.is_held("unique:welcome:9"), "the retry must not be dropped"


class UnconfirmedQueue(MemoryQueue):
    """Queues the job, then says too few replicas confirmed it (as Redis's durable mode does)."""

    async def push(self, job: QueuedJob) -> str:
        return (await self.push_many([job]))[0]

    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        await super().push_many(jobs)
        raise NotReplicated("unconfirmed", job_ids=[j.id for j in jobs], confirmed=0, wanted=1)


@pytest.mark.parametrize("many", [False, True])
async def test_a_push_whose_outcome_is_unknown_keeps_the_lock_so_a_retry_is_dropped(
    many: bool,
) -> None:
    locks = LockManager(MemoryCache())
    queue = UnconfirmedQueue()
    manager = QueueManager(queue, locks=locks)

    async def dispatch() -> str | None:
        if many:
            return (await manager.dispatch_many([Welcome(user_id=9)]))[0]
        return await manager.dispatch(Welcome(user_id=9))

    with pytest.raises(OutcomeUnknown):
        await dispatch()
    assert await locks.is_held("unique:welcome:9"), "the job may be queued"
    assert await dispatch() is None, "the retry is the duplicate the lock drops"
    assert await queue.size("emails") == 1


async def test_a_unique_job_run_inline_gives_its_lock_back_at_once() -> None:
    locks = LockManager(MemoryCache())
    manager = QueueManager(InlineQueue(JobRegistry([Welcome])), locks=locks)

    assert await manager.dispatch(Welcome(user_id=3)) is not None
    assert await manager.dispatch(Welcome(user_id=3)) is not None


async def test_dispatch_many_pushes_in_bulk_and_drops_duplicates() -> None:
    manager, queue = a_manager()

    ids = await manager.dispatch_many([Welcome(user_id=1), Welcome(user_id=1), Report(day="w")])

    assert ids[0] is not None
    assert ids[1] is None
    assert ids[2] is not None
    assert await queue.size("emails") == 1
    assert await queue.size("default") == 1


async def test_dispatch_refuses_something_that_is_not_a_job() -> None:
    manager, _ = a_manager()

    with pytest.raises(TypeError, match="Job instance"):
        await manager.dispatch({"name": "welcome"})  # type: ignore[arg-type]


async def test_the_fake_records_dispatches_and_asserts_on_them() -> None:
    fake = QueueManager.fake(connections=["bulk"])

    await fake.dispatch(Welcome(user_id=1))
    await fake.pending(Report(day="mon")).on_connection("bulk").on_queue("slow").send()

    fake.assert_pushed(Welcome)
    fake.assert_pushed(Welcome, times=1, where=lambda job: job.user_id == 1)
    fake.assert_pushed_on("slow", Report)
    with pytest.raises(AssertionError, match="welcome"):
        fake.assert_pushed(Welcome, times=2)
    with pytest.raises(AssertionError, match="not to be pushed"):
        fake.assert_not_pushed(Report)
    with pytest.raises(AssertionError, match="expected nothing pushed"):
        fake.assert_nothing_pushed()
    with pytest.raises(UnknownConnection):
        await fake.pending(Report(day="x")).on_connection("undeclared").send()


def test_fake_assertions_fail_loudly_on_a_real_manager() -> None:
    manager, _ = a_manager()

    with pytest.raises(AssertionError, match="needs a faking manager"):
        manager.assert_nothing_pushed()  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match="needs a faking manager"):
        manager.assert_pushed(Welcome)  # type: ignore[attr-defined]


def test_the_blocking_facade_dispatches_from_code_without_a_loop() -> None:
    manager, _ = a_manager()

    with manager.blocking() as blocking:
        job_id = blocking.dispatch(Report(day="fri"))
        assert blocking.size("default") == 1
        assert blocking.dispatch(Welcome(user_id=2)) is not None
        assert blocking.dispatch(Welcome(user_id=2)) is None

    assert job_id is not None
