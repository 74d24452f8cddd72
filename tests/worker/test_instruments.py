# SPDX-License-Identifier: MIT
"""The instrument seam: every push, reserve and settle seen at the port, and nothing when unseen."""

from __future__ import annotations

from collections import Counter

import pytest

from rainier_queue import QueueManager
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable, LeaseLost
from rainier_queue.instrument import InstrumentedQueue, PortCall, instrumented
from rainier_queue.worker import Worker

from .jobs import Doomed, Journal, Note, quick, registry, worker_for


class Seen:
    """An observer that keeps every call it is told of."""

    def __init__(self) -> None:
        self.calls: list[PortCall] = []

    def __call__(self, call: PortCall) -> None:
        self.calls.append(call)

    def jobs(self, operation: str, *, failed: bool = False) -> Counter[str]:
        return Counter(
            job.name
            for call in self.calls
            if call.operation == operation and (call.error is not None) == failed
            for job in call.jobs
        )


def test_without_observers_the_worker_and_manager_talk_to_the_driver_itself() -> None:
    queue = MemoryQueue()

    assert instrumented(queue, []) is queue
    assert worker_for(queue, Journal())._port is queue
    manager = QueueManager(queue)
    assert manager._port(None) is queue


async def test_the_worker_and_manager_tell_observers_of_every_push_reserve_and_settle() -> None:
    queue = MemoryQueue()
    seen = Seen()
    manager = QueueManager(queue, observers=[seen])
    journal = Journal()
    worker = Worker(
        queue,
        registry(),
        quick(stop_when_empty=True, concurrency=2),
        dependencies=worker_for(queue, journal)._dependencies,
        observers=[seen],
    )

    await manager.dispatch(Note(text="one"))
    await manager.dispatch_many([Note(text="two"), Doomed(label="bad")])
    stats = await worker.run()

    assert stats.processed == 2
    assert stats.failed == 1
    assert seen.jobs("push") == {"note": 2, "doomed": 1}
    assert seen.jobs("reserve") == {"note": 2, "doomed": 2}, "doomed is delivered twice"
    assert seen.jobs("acknowledge") == {"note": 2}
    assert seen.jobs("release") == {"doomed": 1}, "its first attempt is retried"
    assert seen.jobs("fail") == {"doomed": 1}, "its last goes to the failed store"
    assert all(call.seconds >= 0 for call in seen.calls)
    assert {call.queue for call in seen.calls if call.operation == "reserve"} == {"default"}


class Refusing(MemoryQueue):
    async def push(self, job: QueuedJob) -> str:
        raise BrokerUnavailable("down")


async def test_an_observer_hears_of_a_failed_call_and_the_error_still_reaches_the_caller() -> None:
    seen = Seen()
    manager = QueueManager(Refusing(), observers=[seen])

    with pytest.raises(BrokerUnavailable):
        await manager.dispatch(Note(text="lost"))

    [call] = seen.calls
    assert (call.operation, isinstance(call.error, BrokerUnavailable)) == ("push", True)


async def test_a_stale_acknowledgement_is_told_apart_from_the_ones_that_were_done() -> None:
    inner = MemoryQueue()
    seen = Seen()
    queue = InstrumentedQueue(inner, [seen])
    await manager_push(queue, "kept", "stale")
    kept, stale = await queue.reserve("default", limit=2)
    await inner.release(stale)  # its reservation is no longer current

    outcomes = await queue.acknowledge_many([kept, stale])

    assert outcomes[0] is None
    assert isinstance(outcomes[1], LeaseLost)
    assert seen.jobs("acknowledge") == {"note": 1}
    assert seen.jobs("acknowledge", failed=True) == {"note": 1}


async def test_an_observer_that_raises_is_logged_and_never_fails_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(call: PortCall) -> None:
        raise RuntimeError("instrument bug")

    queue = InstrumentedQueue(MemoryQueue(), [broken])
    manager = QueueManager(queue)

    assert await manager.dispatch(Note(text="fine")) is not None
    assert await queue.size("default") == 1
    assert "an instrument failed on a push call" in caplog.text


async def manager_push(queue: InstrumentedQueue, *texts: str) -> None:
    await QueueManager(queue).dispatch_many([Note(text=text) for text in texts])
