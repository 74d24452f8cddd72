# SPDX-License-Identifier: MIT
"""Rate and concurrency limits per key, both ways: where the driver says a store every
worker shares is at hand, a key over its limit waits unrun, its attempt given back, while
other keys' jobs run; where it says none is, a worker with limited jobs refuses to start
and names `locks`, and given `locks` (a shared store) keeps the limits all the same."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager
from rainier_queue.cache.stores import open_cache, open_cache_beside
from rainier_queue.context import Dependencies
from rainier_queue.errors import ConfigurationError
from rainier_queue.explain import LimitsAt, explain
from rainier_queue.limits import Held, Limiter, Limits, LimitStore, Refused, store_for
from rainier_queue.locks import Cache, LockManager
from rainier_queue.queue import Queue
from rainier_queue.worker import Worker, WorkerOptions

from .backends import Backend

QUICK = timedelta(milliseconds=50)


class Runs:
    """Which jobs started (key, n, attempt), which are running now, and a wake-up."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int, int]] = []
        self.running: set[tuple[str, int]] = set()
        self.done: set[tuple[str, int]] = set()
        self.most_at_once: dict[str, int] = {}
        self.hold = asyncio.Event()
        self.changed = asyncio.Event()

    def start(self, key: str, n: int, attempt: int) -> None:
        self.started.append((key, n, attempt))
        self.running.add((key, n))
        now = sum(1 for k, _ in self.running if k == key)
        self.most_at_once[key] = max(self.most_at_once.get(key, 0), now)
        self.changed.set()

    def end(self, key: str, n: int) -> None:
        self.running.discard((key, n))
        self.done.add((key, n))
        self.changed.set()

    async def until(self, done: object, within: float = 60) -> None:
        """Wait until `done()` holds (a liveness bound, not a timing assertion)."""
        assert callable(done)

        async def check() -> None:
            while not done():  # the worker's stats change without telling: look now and then
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 0.05)

        await asyncio.wait_for(check(), within)


class OneAtATime(Job):
    """At most one job of a key runs at once; a key's first job (n == 0) holds its slot
    until the test lets go."""

    name = "one-at-a-time"
    concurrency_limit = 1
    key: str
    n: int

    def limit_key(self) -> str:
        return self.key

    async def handle(self, ctx: JobContext) -> None:
        runs = ctx.resolve(Runs)
        runs.start(self.key, self.n, ctx.attempt)
        try:
            if self.n == 0 and self.key.endswith(":a"):
                await runs.hold.wait()
        finally:
            runs.end(self.key, self.n)


class OncePerHour(Job):
    name = "once-per-hour"
    rate_limit = "1/h"
    key: str
    n: int

    def limit_key(self) -> str:
        return self.key

    async def handle(self, ctx: JobContext) -> None:
        runs = ctx.resolve(Runs)
        runs.start(self.key, self.n, ctx.attempt)
        runs.end(self.key, self.n)


class FailsFirst(Job):
    """One at a time per key; fails its first attempt and is retried at once."""

    name = "fails-first"
    concurrency_limit = 1
    tries = 2
    key: str
    n: int

    def limit_key(self) -> str:
        return self.key

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)

    async def handle(self, ctx: JobContext) -> None:
        runs = ctx.resolve(Runs)
        runs.start(self.key, self.n, ctx.attempt)
        runs.end(self.key, self.n)
        if self.n == 0 and ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")


REGISTRY = JobRegistry([OneAtATime, OncePerHour, FailsFirst])


@dataclass
class Store:
    """Where the test's workers count limits, and how they are given it."""

    cache: Cache | None
    """None where the worker finds its own (Kafka's lock store, memory)."""
    via_locks: bool
    """Given as the worker's `locks` (a driver with no store of its own), not `limits=`."""


@pytest.fixture
async def store(
    backend: Backend, tmp_path: Path, namespace: str, queue: Queue
) -> AsyncIterator[Store]:
    """The store a CLI worker would count in: opened beside the queue's URL for a database
    or Redis; found by the worker itself for Kafka and memory; and for a broker with no
    store of its own, a SQLite lock store given as the worker's `locks`, as a deployment
    sets `locks` in its config."""
    backend.setup(tmp_path, namespace, ["default"])
    if not queue.capabilities.limits:
        cache = open_cache(f"sqlite:///{tmp_path / 'locks.db'}")
        try:
            yield Store(cache, via_locks=True)
        finally:
            await cache.aclose()
        return
    if isinstance(queue, LimitStore) or not queue.capabilities.shared_between_processes:
        yield Store(None, via_locks=False)
        return
    cache = open_cache_beside(backend.url(tmp_path, namespace))
    try:
        yield Store(cache, via_locks=False)
    finally:
        await cache.aclose()


def _worker(queue: Queue, store: Store, runs: Runs, concurrency: int = 3) -> Worker:
    options = WorkerOptions(concurrency=concurrency, sleep=QUICK, pause_check=QUICK)
    if store.via_locks:
        assert store.cache is not None
        return Worker(
            queue,
            REGISTRY,
            options,
            dependencies=Dependencies([runs]),
            locks=LockManager(store.cache),
        )
    return Worker(queue, REGISTRY, options, dependencies=Dependencies([runs]), limits=store.cache)


async def test_a_driver_keeps_limits_exactly_when_it_says_so(
    backend: Backend, tmp_path: Path, namespace: str, queue: Queue
) -> None:
    has_store = isinstance(queue, LimitStore) or not queue.capabilities.shared_between_processes
    if not has_store:
        try:
            cache = open_cache_beside(backend.url(tmp_path, namespace))
        except ConfigurationError:
            pass
        else:
            has_store = True
            await cache.aclose()

    assert has_store == queue.capabilities.limits, (
        f"{queue.name} declares limits={queue.capabilities.limits}"
    )


async def test_a_worker_with_limited_jobs_and_no_shared_store_refuses_to_start_naming_locks(
    queue: Queue,
) -> None:
    if queue.capabilities.limits:
        pytest.skip(f"{queue.name} keeps limits (what they do is tested beside this)")

    with pytest.raises(ConfigurationError, match="`locks`") as refused:
        Worker(queue, REGISTRY, WorkerOptions())

    assert "one-at-a-time" in str(refused.value)
    Worker(queue, JobRegistry([]), WorkerOptions())  # no limited job: nothing to refuse


async def test_a_key_at_its_concurrency_limit_waits_unrun_while_other_keys_run(
    queue: Queue, store: Store, namespace: str
) -> None:
    runs = Runs()
    a, b = f"{namespace}:a", f"{namespace}:b"
    manager = QueueManager(queue)
    worker = _worker(queue, store, runs)
    running = asyncio.create_task(worker.run())
    try:
        await manager.dispatch(OneAtATime(key=a, n=0))
        await runs.until(lambda: (a, 0) in runs.running)
        await manager.dispatch(OneAtATime(key=a, n=1))
        await manager.dispatch(OneAtATime(key=b, n=0))
        if queue.capabilities.reserved_job_steps_aside:
            # a's first job holds its one slot; b's job runs beside it, and a's second is
            # set aside (again and again, while the slot stays taken) instead of waiting
            # in a worker slot.
            await runs.until(lambda: (b, 0) in runs.done and worker.stats.limited >= 2)
            assert [(k, n) for k, n, _ in runs.started if k == a] == [(a, 0)]
        # else a log: a partition hands out one job at a time, so whatever landed on a's
        # first job's partition waits for it, limited or not; only the bound is checked.

        runs.hold.set()
        await runs.until(lambda: len(runs.started) == 3)
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(running, 60)

    assert runs.most_at_once[a] == 1
    assert sorted(runs.started) == [(a, 0, 1), (a, 1, 1), (b, 0, 1)], (
        "every job ran once, on its first attempt: being set aside costs none"
    )


async def test_a_key_over_its_rate_waits_unrun_while_other_keys_run(
    queue: Queue, store: Store, namespace: str
) -> None:
    runs = Runs()
    a, b = f"{namespace}:a", f"{namespace}:b"
    manager = QueueManager(queue)
    await manager.dispatch_many([OncePerHour(key=a, n=0), OncePerHour(key=a, n=1)])
    await manager.dispatch(OncePerHour(key=b, n=0))
    worker = _worker(queue, store, runs)
    running = asyncio.create_task(worker.run())
    try:
        await runs.until(lambda: len(runs.started) == 2 and worker.stats.limited >= 1)
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(running, 60)

    assert sorted(k for k, _, _ in runs.started) == [a, b], "one of a's, and b's"


async def test_a_slot_is_given_back_when_its_job_fails_and_is_retried(
    queue: Queue, store: Store, namespace: str
) -> None:
    runs = Runs()
    a = f"{namespace}:a"
    manager = QueueManager(queue)
    await manager.dispatch_many([FailsFirst(key=a, n=0), FailsFirst(key=a, n=1)])
    worker = _worker(queue, store, runs)
    running = asyncio.create_task(worker.run())
    try:
        # Had the failed attempt kept its slot, nothing of `a` would run again until the
        # slot's lease (30 s from the first start, so after this wait began) lapsed: past
        # this wait, which leaves a slow machine room (20 s timed out once in CI).
        await runs.until(lambda: len(runs.started) == 3, within=25)
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(running, 60)

    assert sorted(runs.started) == [(a, 0, 1), (a, 0, 2), (a, 1, 1)]
    assert runs.most_at_once[a] == 1


async def test_a_dead_worker_s_slot_frees_once_its_lease_lapses_and_says_who_held_it(
    queue: Queue, store: Store, namespace: str
) -> None:
    shared = store_for(queue, store.cache, None, REGISTRY)
    assert shared is not None
    key, limits = f"{namespace}:a", Limits(None, 1)
    dead = Limiter(shared, holder="worker gone", lease=timedelta(milliseconds=300))
    held = await dead.take(key, limits, "job-1")
    assert isinstance(held, Held)
    assert held.renewing is not None
    held.renewing.cancel()  # the worker died: nothing renews its slot or gives it back

    alive = Limiter(shared, holder="worker here")
    assert await alive.holders(key, limits) == ["worker gone job job-1"]
    refused = await alive.take(key, limits, "job-2")
    assert isinstance(refused, Refused)
    assert "slots" in refused.reason

    async def taken() -> Held:
        while True:
            got = await alive.take(key, limits, "job-2")
            if isinstance(got, Held):
                return got
            await asyncio.sleep(0.05)

    mine = await asyncio.wait_for(taken(), 20)
    await alive.give_back(mine)
    assert await alive.holders(key, limits) == []


async def test_explain_names_who_holds_a_key_s_slots_and_when_its_next_start_fits(
    queue: Queue, store: Store, namespace: str
) -> None:
    if not queue.capabilities.job_lookup:
        pytest.skip(f"{queue.name} cannot look a job up by id, so explain cannot start")
    shared = store_for(queue, store.cache, None, REGISTRY)
    assert shared is not None
    a, b = f"{namespace}:a", f"{namespace}:b"
    elsewhere = Limiter(shared, holder="worker w-elsewhere")
    held = await elsewhere.take(a, Limits(None, 1), "job-x")
    assert isinstance(held, Held)
    spent = await elsewhere.take(b, Limits((1, timedelta(hours=1)), None), "job-y")
    assert isinstance(spent, Held)
    manager = QueueManager(queue)
    slotless = await manager.dispatch(OneAtATime(key=a, n=1))
    rated = await manager.dispatch(OncePerHour(key=b, n=1))
    free = await manager.dispatch(OneAtATime(key=f"{namespace}:c", n=1))
    assert slotless is not None
    assert rated is not None
    assert free is not None
    at = LimitsAt(shared, REGISTRY)
    try:
        over_slots = await explain(queue, slotless, limits=at)
        over_rate = await explain(queue, rated, limits=at)
        within = await explain(queue, free, limits=at)
    finally:
        await elsewhere.give_back(held)

    assert over_slots.code == "concurrency_limited"
    assert "worker w-elsewhere job job-x" in over_slots.causes[0].says
    assert over_rate.code == "rate_limited"
    assert "1 job(s) per" in over_rate.causes[0].says
    assert within.code not in ("concurrency_limited", "rate_limited")
