# SPDX-License-Identifier: MIT
"""`keep_aiormq_as_is`: the way back to aiormq's own reader, channels and publish.

The driver reads frames, hands out deliveries and writes batches of
publishes with code of its own under aiormq's names (aiormq_seams.py). Should
that code ever misread a broker, a process can ask for aiormq's own, and the
driver must work as before on it: slower, nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiormq.connection
import pytest

from rainier_queue.drivers.rabbitmq import (
    aiormq_seams,
    deliveries,
    frames,
    keep_aiormq_as_is,
    publishing,
)
from rainier_queue.queue import Reservation

from .conftest import a_job
from .rabbitmq_emails import emails_prefix, opened

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    async with emails_prefix("a") as prefix:
        yield prefix


@pytest.fixture
def as_is_for_this_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever `keep_aiormq_as_is` changes is put back after the test."""
    monkeypatch.setattr(aiormq_seams, "_as_is", False)
    monkeypatch.setattr(aiormq_seams, "_replaced", dict(aiormq_seams._replaced))
    for name in ("FrameReceiver", "Channel"):
        monkeypatch.setattr(aiormq.connection, name, getattr(aiormq.connection, name))


@pytest.mark.usefixtures("as_is_for_this_test")
async def test_a_queue_opened_after_the_call_works_on_aiormq_as_it_is(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert frames.install()  # what an earlier queue left
    assert deliveries.install()
    readers: list[str] = []
    receiver = aiormq.connection.Connection._Connection__reader  # type: ignore[attr-defined]

    async def reading(self: Any, frame_receiver: Any) -> None:
        readers.append(type(frame_receiver).__name__)
        await receiver(self, frame_receiver)

    monkeypatch.setattr(aiormq.connection.Connection, "_Connection__reader", reading)

    async def written(*_: Any) -> Any:
        raise AssertionError("a batch was written by the driver's own publish")

    monkeypatch.setattr(publishing, "_write", written)

    keep_aiormq_as_is()

    assert aiormq.connection.FrameReceiver is frames.BaseReceiver
    assert getattr(aiormq.connection, "Channel") is deliveries.BaseChannel  # noqa: B009
    assert not frames.install(), "put back in after the call"
    assert not deliveries.install(), "put back in after the call"
    queue = opened(prefix)
    try:
        await queue.provision(["emails"])
        jobs = [a_job("emails") for _ in range(5)]
        await queue.push_many(jobs)
        got: list[Reservation] = []
        while len(got) < len(jobs):
            got += await queue.reserve("emails", limit=len(jobs))
        assert sorted(r.job.id for r in got) == sorted(j.id for j in jobs)
        await queue.acknowledge_many(got)
        assert await queue.size("emails") == 0
    finally:
        await queue.aclose()
    assert readers, "no connection was opened"
    assert set(readers) == {"FrameReceiver"}, f"frames were read by {readers}"
