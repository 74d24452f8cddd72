# SPDX-License-Identifier: MIT
"""Batches on every driver, both ways: where the driver keeps them, the callbacks that
apply are queued once, with the counts, when the last job ends, and a job recorded twice
(a rerun after a crash) or two last jobs recorded at once queue them once; where it keeps
none, dispatching a batch is refused, naming the driver, and nothing is queued."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import pytest

from rainier_queue import (
    BatchCounts,
    Dependencies,
    Job,
    JobContext,
    JobRegistry,
    QueueManager,
    batch,
)
from rainier_queue.batchstate import (
    BATCH,
    BatchStore,
    Callback,
    Member,
    Outcome,
    batch_store_of,
    callback_id,
    member,
)
from rainier_queue.connections import open_queue as open_url
from rainier_queue.drivers import driver_class
from rainier_queue.envelope.sealing import is_sealed
from rainier_queue.errors import ConfigurationError, UnsupportedOperation
from rainier_queue.queue import Queue
from rainier_queue.schemes import scheme_of
from rainier_queue.worker import Worker, WorkerOptions

from .backends import Backend
from .conftest import OpenQueue
from .jobs import a_job


class Seen:
    """What the jobs of these tests did: members that ran, callbacks with their counts."""

    def __init__(self) -> None:
        self.members: list[int] = []
        self.callbacks: list[tuple[str, BatchCounts | None]] = []


class Part(Job):
    name = "batch-part"
    tries = 1
    n: int
    fail: bool = False

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Seen).members.append(self.n)
        if self.fail:
            raise RuntimeError(f"part {self.n} failed")


class Called(Job):
    name = "batch-called"
    tries = 1
    kind: str

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Seen).callbacks.append((self.kind, ctx.batch))


REGISTRY = JobRegistry([Part, Called])


@pytest.fixture
def batch_queue(backend: Backend, tmp_path: Path, namespace: str, queue: Queue) -> Queue:
    if not queue.capabilities.batches:
        pytest.skip(f"{backend.name} lacks batches: {backend.missing('batches')}")
    backend.setup(tmp_path, namespace, ["default"])
    return queue


async def _work(queue: Queue, seen: Seen) -> None:
    options = WorkerOptions(stop_when_empty=True, drain_wait=None, concurrency=4)
    worker = Worker(queue, REGISTRY, options, dependencies=Dependencies([seen]))
    await asyncio.wait_for(worker.run(), 120)


async def test_a_driver_keeps_batches_exactly_when_it_says_so(
    backend: Backend, queue: Queue
) -> None:
    declared = queue.capabilities.batches
    store = batch_store_of(queue)
    assert (store is not None) == declared, f"{queue.name} declares batches={declared}"
    assert store is None or isinstance(store, BatchStore)
    assert (backend.missing("batches") is None) == declared, (
        "a driver that keeps no batches says why in its backend's `lacks`, and only then"
    )


async def test_a_batch_is_refused_where_the_driver_keeps_none_and_nothing_is_queued(
    backend: Backend, tmp_path: Path, namespace: str, queue: Queue
) -> None:
    backend.setup(tmp_path, namespace, ["default"])
    parts = batch([Part(n=1), Part(n=2)]).then(Called(kind="then"))
    if queue.capabilities.batches:
        assert await parts.dispatch(QueueManager(queue))
        assert await queue.size("default") == 2
        return
    with pytest.raises(UnsupportedOperation, match=f"the {queue.name} driver has no store"):
        await parts.dispatch(QueueManager(queue))
    assert await queue.size("default") == 0, "nothing queued"


async def test_a_broker_counting_in_a_lock_store_refuses_a_batch_without_one_naming_locks(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    # The other way for a driver whose batches depend on its `locks` option (SQS,
    # RabbitMQ): the suite's URL names a store; here the option is emptied.
    url = backend.url(tmp_path, namespace)
    driver = driver_class(scheme_of(url))
    if "locks" not in driver.OPTIONS:
        pytest.skip(f"{backend.name} takes no `locks`: its batches do not depend on one")
    if driver.capabilities.batches:  # it cannot run without its lock store at all (Kafka)
        with pytest.raises(ConfigurationError, match="`locks`"):
            open_url(url, {**backend.options, "locks": ""})
        return
    bare = open_url(url, {**backend.options, "locks": ""})
    try:
        backend.setup(tmp_path, namespace, ["default"])
        assert not bare.capabilities.batches
        assert batch_store_of(bare) is None
        parts = batch([Part(n=1), Part(n=2)]).then(Called(kind="then"))
        with pytest.raises(UnsupportedOperation, match="Set the connection's `locks` option"):
            await parts.dispatch(QueueManager(bare))
        assert await bare.size("default") == 0, "nothing queued"
    finally:
        await bare.aclose()
    with pytest.raises(ConfigurationError, match="seen by this process alone"):
        open_url(url, {**backend.options, "locks": "memory://"})


async def test_then_and_finally_run_once_with_the_counts_when_every_job_succeeded(
    batch_queue: Queue,
) -> None:
    manager = QueueManager(batch_queue)
    seen = Seen()
    batch_id = await (
        batch([Part(n=n) for n in range(5)])
        .then(Called(kind="then"))
        .catch(Called(kind="catch"))
        .finally_(Called(kind="finally"))
        .dispatch(manager)
    )
    before = await manager.batch(batch_id)
    assert (before.total, before.pending, before.finished) == (5, 5, False)

    await _work(batch_queue, seen)

    assert sorted(seen.members) == [0, 1, 2, 3, 4]
    counts = BatchCounts(batch_id, 5, 5, 0, 0)
    assert sorted(seen.callbacks, key=lambda c: c[0]) == [
        ("finally", counts),
        ("then", counts),
    ]
    after = await manager.batch(batch_id)
    assert (after.succeeded, after.failed, after.pending, after.finished) == (5, 0, 0, True)
    assert after.fired() == ("then", "finally")


async def test_catch_runs_instead_of_then_when_a_job_failed_for_good(batch_queue: Queue) -> None:
    manager = QueueManager(batch_queue)
    seen = Seen()
    parts = [Part(n=0), Part(n=1, fail=True), Part(n=2)]
    batch_id = await (
        batch(parts)
        .then(Called(kind="then"))
        .catch(Called(kind="catch"))
        .finally_(Called(kind="finally"))
        .dispatch(manager)
    )

    await _work(batch_queue, seen)

    counts = BatchCounts(batch_id, 3, 2, 1, 0)
    assert sorted(seen.callbacks, key=lambda c: c[0]) == [("catch", counts), ("finally", counts)]


async def test_a_job_recorded_twice_counts_once_and_a_finished_batch_changes_no_more(
    batch_queue: Queue,
) -> None:
    store = batch_store_of(batch_queue)
    assert store is not None
    called = a_job(name="batch-called", payload={"kind": "finally"})
    callback = Callback.of("finally", called.with_changes(id=callback_id("b1", "finally")))
    await store.open_batch("b1", 2, [callback])
    one = Member("b1", ("default",))

    first = await store.record_in_batch(one, "job-1", Outcome.SUCCEEDED)
    again = await store.record_in_batch(one, "job-1", Outcome.FAILED)  # a rerun after a crash

    assert first is not None
    assert again is not None
    assert (again.succeeded, again.failed, again.finished) == (1, 0, False)
    assert await batch_queue.size("default") == 0, "no callback before the last job"
    last = await store.record_in_batch(one, "job-2", Outcome.CANCELLED)
    assert last is not None
    assert last.finished
    assert (last.succeeded, last.cancelled) == (1, 1)
    await store.record_in_batch(one, "job-2", Outcome.CANCELLED)
    await store.record_in_batch(one, "job-3", Outcome.SUCCEEDED)
    assert await batch_queue.size("default") == 1, "the callback, queued once"
    [reserved] = await batch_queue.reserve("default")
    assert reserved.job.id == "b1.finally", "queued under the id its batch gave it"
    assert BATCH not in reserved.job.headers


async def test_the_last_two_jobs_recorded_at_once_queue_the_callbacks_once(
    batch_queue: Queue, open_queue: OpenQueue
) -> None:
    # Two connections where the driver is shared between processes, as two machines have.
    other = open_queue() if batch_queue.capabilities.shared_between_processes else batch_queue
    here, there = batch_store_of(batch_queue), batch_store_of(other)
    assert here is not None
    assert there is not None
    for round_ in range(5):
        name = f"race-{round_}"
        callback = Callback.of("then", a_job(name="batch-called", payload={"kind": "then"}))
        await here.open_batch(name, 3, [callback])
        both = Member(name, ("default",))
        await here.record_in_batch(both, "a", Outcome.SUCCEEDED)

        await asyncio.gather(
            here.record_in_batch(both, "b", Outcome.SUCCEEDED),
            there.record_in_batch(both, "c", Outcome.SUCCEEDED),
        )

        progress = await here.batch_progress(name)
        assert progress is not None
        assert progress.finished
    assert await batch_queue.size("default") == 5, "one callback per batch, never two"


async def test_a_waiting_job_of_a_batch_cancelled_counts_as_cancelled(batch_queue: Queue) -> None:
    if not batch_queue.capabilities.cancellable:
        pytest.skip(f"{batch_queue.name} cannot cancel a job")
    manager = QueueManager(batch_queue)
    seen = Seen()
    batch_id = await batch([Part(n=0), Part(n=1)]).catch(Called(kind="catch")).dispatch(manager)
    [first, *_] = await batch_queue.reserve("default")  # to learn a job's id
    await batch_queue.release(first, count_attempt=False)
    cancelled = await manager.cancel(first.job.id)

    await _work(batch_queue, seen)

    progress = await manager.batch(batch_id)
    assert progress.finished, cancelled.describe()
    assert (progress.succeeded, progress.cancelled) == (1, 1)
    assert [kind for kind, _ in seen.callbacks] == ["catch"]
    [(_, counts)] = seen.callbacks
    assert counts is not None
    assert counts.cancelled == 1


async def test_each_job_of_a_batch_carries_its_batch_and_a_job_in_none_carries_nothing(
    batch_queue: Queue,
) -> None:
    manager = QueueManager(batch_queue)
    batch_id = await batch([Part(n=0)]).then(Called(kind="then")).dispatch(manager)
    await manager.dispatch(Part(n=9))

    found: dict[int, Member | None] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while len(found) < 2:  # a log hands out one record of a partition at a time
        assert loop.time() < deadline, f"only {sorted(found)} of the 2 jobs were handed out"
        for reserved in await batch_queue.reserve("default", limit=2):
            found[reserved.job.payload["n"]] = member(reserved.job.headers)
            await batch_queue.acknowledge(reserved)
    assert found[9] is None
    assert found[0] == Member(batch_id, ("default",))


async def test_a_batch_unknown_by_id_is_a_lookup_error(batch_queue: Queue) -> None:
    with pytest.raises(LookupError, match="no batch nope"):
        await QueueManager(batch_queue).batch("nope")


async def test_on_a_connection_that_encrypts_a_callback_is_stored_sealed_and_runs_opened(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    sealing = open_queue(encryption={"keys": {"k1": key}})
    if not sealing.capabilities.batches:
        pytest.skip(f"{backend.name} lacks batches: {backend.missing('batches')}")
    backend.setup(tmp_path, namespace, ["default"])
    manager = QueueManager(sealing)
    seen = Seen()
    batch_id = await batch([Part(n=1)]).then(Called(kind="in confidence")).dispatch(manager)
    [part] = await sealing.reserve("default")
    assert is_sealed(part.job.payload)
    # Recorded as a worker records it, without a worker that stops as the callback arrives
    # (RabbitMQ counts a delivery of a job on its way to a consumer that is cancelled).
    store, belongs = batch_store_of(sealing), member(part.job.headers)
    assert store is not None
    assert belongs is not None
    await store.record_in_batch(belongs, part.job.id, Outcome.SUCCEEDED)
    await sealing.acknowledge(part)

    [callback] = await sealing.reserve("default")
    assert callback.job.id == callback_id(batch_id, "then")
    assert is_sealed(callback.job.payload), "the callback is stored as the connection stores"
    assert "in confidence" not in callback.job.to_json()
    await sealing.release(callback, count_attempt=False)
    await _work(sealing, seen)
    assert seen.callbacks == [("in confidence", BatchCounts(batch_id, 1, 1, 0, 0))]
