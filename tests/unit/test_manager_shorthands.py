# SPDX-License-Identifier: MIT
"""The manager's calls a user of the upstream reaches for first, async and through the facade.

`dispatch_now`, `dispatch_on`, `dispatch_after` (and the keywords of
`dispatch` they stand for), `release_uniqueness`, `has_connection`, and the
trimming of the default queues: each pinned as the upstream's checklist
pins it, on a real memory queue and a memory lock store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from rainier_queue import Job, JobContext, JobRegistry, LockManager, QueueConfig, QueueManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.context import Dependencies
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import UnknownConnection, UnknownJob


@dataclass
class Tally:
    ran: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    attempts: list[tuple[int, int]] = field(default_factory=list)


class Count(Job):
    name = "count"
    tries = 5
    label: str
    boom: bool = False

    def unique_id(self) -> str | None:
        return self.label

    async def handle(self, ctx: JobContext) -> None:
        tally = ctx.resolve(Tally)
        tally.attempts.append((ctx.attempt, ctx.max_attempts))
        if self.boom:
            raise RuntimeError(f"{self.label} went wrong")
        tally.ran.append(self.label)

    async def failed(self, ctx: JobContext, error: BaseException) -> None:
        ctx.resolve(Tally).failed.append(f"{self.label}: {error}")


class Plain(Job):
    name = "plain"
    day: str

    def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Tally).ran.append(self.day)


class Unregistered(Job):
    name = "unregistered"

    async def handle(self, ctx: JobContext) -> None:
        pass


REGISTRY = JobRegistry([Count, Plain])


def a_manager(
    *, locks: bool = True, tally: Tally | None = None, **kwargs: object
) -> tuple[QueueManager, MemoryQueue]:
    queue = MemoryQueue()
    manager = QueueManager(
        queue,
        registry=REGISTRY,
        locks=LockManager(MemoryCache()) if locks else None,
        dependencies=Dependencies([tally or Tally()]),
        **kwargs,  # type: ignore[arg-type]
    )
    return manager, queue


# -- dispatch_now --------------------------------------------------------------------


async def test_dispatch_now_runs_the_job_here_as_attempt_one_of_one_and_queues_nothing() -> None:
    tally = Tally()
    manager, queue = a_manager(tally=tally)

    job_id = await manager.dispatch_now(Count(label="now"))

    assert job_id
    assert tally.ran == ["now"]
    assert tally.attempts == [(1, 1)], "one attempt, whatever the job's own tries"
    assert await queue.size("default") == 0
    assert not await manager.locks.is_held("unique:count:now")  # type: ignore[union-attr]


async def test_dispatch_now_runs_the_failed_hook_then_raises_the_jobs_error() -> None:
    tally = Tally()
    manager, queue = a_manager(tally=tally)

    with pytest.raises(RuntimeError, match="bad went wrong"):
        await manager.dispatch_now(Count(label="bad", boom=True))

    assert tally.failed == ["bad: bad went wrong"]
    assert await queue.size("default") == 0


async def test_dispatch_now_runs_a_plain_def_handler_with_dependencies_given_to_it() -> None:
    manager, _ = a_manager()
    mine = Tally()

    await manager.dispatch_now(Plain(day="mon"), dependencies=Dependencies([mine]))

    assert mine.ran == ["mon"]


async def test_dispatch_now_refuses_a_job_the_registry_does_not_know() -> None:
    manager, queue = a_manager()

    with pytest.raises(UnknownJob, match="unregistered"):
        await manager.dispatch_now(Unregistered())
    assert await queue.size("default") == 0


# -- dispatch_on, dispatch_after and the keywords of dispatch ------------------------


async def test_dispatch_on_and_dispatch_after_are_shorthands_for_the_keywords() -> None:
    manager, queue = a_manager()

    on_id = await manager.dispatch_on("mail", Plain(day="mon"))
    after_id = await manager.dispatch_after(timedelta(minutes=5), Plain(day="tue"))
    seconds_id = await manager.dispatch_after(300, Plain(day="wed"))

    [on_mail] = await queue.reserve("mail")
    assert on_mail.job.id == on_id
    assert await queue.reserve("default") == [], "both delayed five minutes"
    assert await queue.size("default") == 2
    delayed = {entry[2].id: entry[2] for entry in queue._lanes["default"].delayed}
    assert set(delayed) == {after_id, seconds_id}
    for envelope in delayed.values():
        assert envelope.available_at - envelope.created_at >= timedelta(minutes=5)


async def test_dispatch_keywords_choose_queue_connection_tries_headers_and_time() -> None:
    bulk = MemoryQueue()
    manager, queue = a_manager(connections={"bulk": bulk})
    moment = datetime.now(UTC) + timedelta(hours=1)

    await manager.dispatch(
        Plain(day="mon"), queue="mail", connection="bulk", tries=7, headers={"trace": "t"}
    )
    await manager.dispatch(Plain(day="tue"), at=moment)

    [sent] = await bulk.reserve("mail")
    assert sent.job.max_attempts == 7
    assert sent.job.headers == {"trace": "t"}
    assert await queue.size("mail") == 0, "the connection and the queue are separate choices"
    [(_, _, later)] = queue._lanes["default"].delayed
    assert later.available_at == moment


async def test_dispatch_keywords_are_checked_like_the_builders_steps() -> None:
    manager, queue = a_manager()

    with pytest.raises(UnknownConnection, match="`nowhere`"):
        await manager.dispatch(Count(label="x"), connection="nowhere")
    with pytest.raises(ValueError, match="`delay` or `at`, not both"):
        await manager.dispatch(Plain(day="x"), delay=5, at=datetime.now(UTC))

    assert await queue.size("default") == 0
    assert await manager.dispatch(Count(label="x")) is not None, "no stray lock was left"


# -- release_uniqueness --------------------------------------------------------------


async def test_release_uniqueness_lets_a_new_dispatch_of_the_job_in_again() -> None:
    manager, queue = a_manager()
    assert await manager.dispatch(Count(label="a")) is not None
    assert await manager.dispatch(Count(label="a")) is None, "a duplicate while one waits"

    assert await manager.release_uniqueness(Count(label="a")) is True

    assert await manager.dispatch(Count(label="a")) is not None
    assert await queue.size("default") == 2


async def test_release_uniqueness_takes_the_key_the_envelope_carries() -> None:
    manager, queue = a_manager()
    await manager.dispatch(Count(label="b"))
    [reservation] = await queue.reserve("default")
    key = reservation.job.unique_key
    assert key is not None

    assert await manager.release_uniqueness(key) is True
    assert await manager.release_uniqueness(key) is False, "nothing left to release"
    assert await manager.dispatch(Count(label="b")) is not None


async def test_release_uniqueness_is_false_without_a_lock_store() -> None:
    manager, _ = a_manager(locks=False)

    assert await manager.release_uniqueness(Count(label="c")) is False


async def test_release_uniqueness_refuses_what_has_no_uniqueness_lock() -> None:
    manager, _ = a_manager()

    with pytest.raises(ValueError, match="`plain` is not unique"):
        await manager.release_uniqueness(Plain(day="mon"))
    with pytest.raises(ValueError, match="not a uniqueness key"):
        await manager.release_uniqueness("count:c")


# -- accessors -------------------------------------------------------------------------


def test_has_connection_answers_for_declared_names_only() -> None:
    manager, _ = a_manager(connections={"bulk": MemoryQueue()})

    assert manager.has_connection("bulk")
    assert manager.has_connection("default")
    assert not manager.has_connection("nowhere")
    assert manager.blocking().has_connection("bulk")
    assert not manager.blocking().has_connection("nowhere")


def test_default_queues_are_trimmed_with_blanks_dropped_in_declared_order() -> None:
    manager, _ = a_manager(default_queues=["high", "  ", "", " low "])

    assert manager.default_queues() == ["high", "low"]
    assert QueueManager.fake(default_queues=[" b", "a "]).default_queues() == ["b", "a"]


def test_a_configs_queues_are_trimmed_too_as_a_list_or_as_text() -> None:
    listed = QueueConfig.from_mapping(
        {"queues": [" high", " ", "low "], "connections": {"main": "memory://"}}
    )
    text = QueueConfig.from_mapping({"queues": "high, ,low", "connections": {"main": "memory://"}})

    assert listed.build().default_queues() == ["high", "low"]
    assert text.build().default_queues() == ["high", "low"]


def test_an_all_blank_declaration_leaves_the_default_queue() -> None:
    manager, _ = a_manager(default_queues=["  ", ""])

    assert manager.default_queues() == ["default"]


# -- the warning for a unique job without a lock store ----------------------------------


async def test_a_unique_job_without_a_lock_store_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager, queue = a_manager(locks=False)

    with caplog.at_level(logging.WARNING, logger="rainier_queue.dispatch"):
        for label in ("a", "a", "b"):
            await manager.dispatch(Count(label=label))

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "no lock store" in warnings[0]
    assert "  " not in warnings[0]
    assert await queue.size("default") == 3, "dispatched without deduplication"


# -- the same calls through the blocking facade ----------------------------------------


def test_the_blocking_facade_has_the_same_shorthands() -> None:
    tally = Tally()
    manager, _ = a_manager(tally=tally)
    facade = manager.blocking()
    try:
        assert facade.dispatch_now(Count(label="now"))
        assert tally.ran == ["now"]
        with pytest.raises(RuntimeError, match="bad went wrong"):
            facade.dispatch_now(Count(label="bad", boom=True))
        assert tally.failed == ["bad: bad went wrong"]

        assert facade.dispatch_on("mail", Plain(day="mon"))
        assert facade.dispatch_after(60, Plain(day="tue"))
        assert facade.dispatch(Count(label="k"), queue="mail", tries=2)
        assert facade.dispatch(Count(label="k")) is None
        assert facade.release_uniqueness(Count(label="k")) is True
        assert facade.dispatch(Count(label="k")) is not None

        assert facade.size("mail") == 2
        assert facade.size("default") == 2
    finally:
        facade.close()
