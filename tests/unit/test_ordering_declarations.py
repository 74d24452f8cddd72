# SPDX-License-Identifier: MIT
"""What a job declares as its ordering key, and what a dispatch carries of it."""

from __future__ import annotations

import pytest

from rainier_queue import Job, JobContext, QueueManager, job
from rainier_queue.drivers.inline import InlineQueue
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope.packing import build_envelope
from rainier_queue.errors import UnsupportedOperation
from rainier_queue.job import ORDERING_KEY, ORDERING_KEY_LENGTH
from rainier_queue.registry import JobRegistry


class SyncAccount(Job):
    name = "sync-account"
    account: str | None

    def ordering_key(self) -> str | None:
        return None if self.account is None else f"account:{self.account}"

    async def handle(self, ctx: JobContext) -> None:
        return None


class Plain(Job):
    name = "plain"

    async def handle(self, ctx: JobContext) -> None:
        return None


def test_a_job_with_an_ordering_key_carries_it_in_its_headers() -> None:
    envelope = build_envelope(SyncAccount(account="7"))

    assert envelope.headers[ORDERING_KEY] == "account:7"


def test_a_job_whose_key_is_none_or_that_declares_none_carries_no_key() -> None:
    assert ORDERING_KEY not in build_envelope(SyncAccount(account=None)).headers
    assert ORDERING_KEY not in build_envelope(Plain()).headers
    assert Plain().ordering_key() is None


def test_an_ordering_key_that_is_not_a_string_or_too_long_is_refused_at_dispatch() -> None:
    class Numbered(Job):
        name = "numbered"

        def ordering_key(self) -> str | None:
            return 7  # type: ignore[return-value]

    class Long(Job):
        name = "long"

        def ordering_key(self) -> str | None:
            return "x" * (ORDERING_KEY_LENGTH + 1)

    with pytest.raises(TypeError, match=r"Numbered.ordering_key\(\) returns a non-empty string"):
        build_envelope(Numbered())
    with pytest.raises(ValueError, match=rf"over the limit of {ORDERING_KEY_LENGTH}"):
        build_envelope(Long())


def test_a_job_function_names_the_parameter_its_calls_are_ordered_by() -> None:
    @job(name="charge", ordering_key="account_id")
    async def charge(ctx: JobContext, account_id: int, cents: int) -> None:
        return None

    envelope = build_envelope(charge(account_id=42, cents=100))

    assert envelope.headers[ORDERING_KEY] == "42"


def test_a_job_function_ordered_by_a_parameter_it_lacks_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match=r"ordering_key names the parameter.*one of cents"):

        @job(name="charge-badly", ordering_key="account")
        async def charge_badly(ctx: JobContext, cents: int) -> None:
            return None


async def test_a_dispatch_with_a_key_is_kept_as_a_second_job_not_dropped_as_a_duplicate() -> None:
    queue = MemoryQueue()
    manager = QueueManager(queue)

    first = await manager.dispatch(SyncAccount(account="1"))
    second = await manager.dispatch(SyncAccount(account="1"))

    assert first is not None
    assert second not in (None, first)
    assert await queue.size("default") == 2


async def test_a_dispatch_with_a_key_to_the_sync_driver_is_refused_and_dispatch_now_runs_it() -> (
    None
):
    registry = JobRegistry([SyncAccount])
    manager = QueueManager(InlineQueue(registry), registry=registry)

    with pytest.raises(UnsupportedOperation, match="the sync driver"):
        await manager.dispatch(SyncAccount(account="1"))
    assert await manager.dispatch_now(SyncAccount(account="1"))


async def test_the_fake_manager_records_a_job_with_an_ordering_key_and_its_key() -> None:
    fake = QueueManager.fake()

    await fake.dispatch(SyncAccount(account="9"))

    [envelope] = fake.pushed_envelopes(SyncAccount)
    assert envelope.headers[ORDERING_KEY] == "account:9"
