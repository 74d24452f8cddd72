# SPDX-License-Identifier: MIT
"""The operational promises, on every driver: what a user sees when things go wrong.

Credentials never show; a server that is not there is `BrokerUnavailable`
and nothing was sent; a push whose answer is lost says its outcome is
unknown and is not resent; a misspelt option is refused with a suggestion;
namespaces never see each other's jobs; a push from another process wakes
an idle worker, on a driver that also polls with its poll a minute apart
(`Backend.wake_only`), so only a wake-up passes. Each driver gives what
these need through its Backend hooks (backends.py); one that cannot give a
hook says why, and the tests that need it are skipped on it with that reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rainier_queue import Dependencies, Job, JobContext, JobRegistry, Worker, WorkerOptions
from rainier_queue.connections import open_queue as open_url
from rainier_queue.drivers import DriverContext
from rainier_queue.errors import BrokerUnavailable, OutcomeUnknown, QueueError, UnknownOption
from rainier_queue.queue import FailedJobStore, Queue, Reservation

from ..cutting_relay import CuttingRelay
from .backends import SECRET, Backend
from .conftest import OpenQueue
from .jobs import a_job

T = TypeVar("T")

LONG = timedelta(minutes=5)
"""Longer than any test may run: a wait this long ends in time only by being woken."""
WOKEN_WITHIN = 10
"""Seconds a woken wait has to end: generous (a wake-up takes milliseconds, a poll well under
a second), and short, because on a driver that cannot be woken the test waits it out."""


# -- credentials ----------------------------------------------------------------------


@pytest.mark.needs("secret_url")
async def test_the_description_and_repr_never_show_the_password(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    assert backend.secret_url is not None
    url = backend.secret_url(tmp_path, namespace)
    queue = open_url(url, backend.options, DriverContext())
    try:
        for shown in (queue.describe(), repr(queue), str(queue)):
            assert SECRET not in shown, shown
        address = re.split(r"[/?]", url.partition("@")[2])[0]
        assert address in queue.describe(), "the description still says where the queue is"
    finally:
        await queue.aclose()
        if backend.cleanup is not None:
            await backend.cleanup(tmp_path, namespace)


@pytest.mark.needs("secret_url")
async def test_errors_and_logs_never_show_the_password(
    backend: Backend, tmp_path: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert backend.secret_url is not None
    queue = open_url(backend.secret_url(tmp_path, namespace), backend.options, DriverContext())
    errors: list[BaseException] = []
    try:
        for call in (
            lambda: queue.push(a_job()),
            lambda: queue.size("default"),
            lambda: queue.reserve("default"),
        ):
            try:
                await asyncio.wait_for(call(), 60)  # a liveness bound
            except QueueError as exc:
                errors.append(exc)
    finally:
        await queue.aclose()
        if backend.cleanup is not None:
            await backend.cleanup(tmp_path, namespace)

    for error in errors:
        printed = "".join(traceback.format_exception(error))
        assert SECRET not in printed, printed
    logged = [record.getMessage() for record in caplog.records]
    assert not [line for line in logged if SECRET in line], logged


# -- a server that is not there, an answer that is lost ----------------------------------


@pytest.mark.needs("unreachable_url")
async def test_a_server_that_is_not_there_is_broker_unavailable_and_nothing_was_sent(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    assert backend.unreachable_url is not None
    queue = open_url(backend.unreachable_url(tmp_path, namespace), backend.options, DriverContext())
    try:
        with pytest.raises(BrokerUnavailable) as pushed:
            await asyncio.wait_for(queue.push(a_job()), 60)
        assert not isinstance(pushed.value, OutcomeUnknown), "nothing was sent: safe to retry"
        assert re.search(r"unreachable|unavailable|could not connect", str(pushed.value)), (
            f"the message says what is wrong: {pushed.value}"
        )
        with pytest.raises(BrokerUnavailable):
            await asyncio.wait_for(queue.size("default"), 60)
        with pytest.raises(BrokerUnavailable):
            await asyncio.wait_for(queue.reserve("default"), 60)
    finally:
        await queue.aclose()


@pytest.mark.needs("cut")
@pytest.mark.parametrize("deliver", [True, False], ids=["push-arrived", "push-lost"])
async def test_a_push_whose_answer_is_lost_says_its_outcome_is_unknown(
    backend: Backend,
    tmp_path: Path,
    namespace: str,
    open_queue: Callable[..., Queue],
    deliver: bool,
) -> None:
    cut = backend.cut
    assert cut is not None
    direct = open_queue()
    await direct.size("default")  # the namespace's schema is made here, not through the relay
    for jobs, marker in cut.pushes:
        relay = CuttingRelay(cut.port, marker, deliver=deliver)
        port = await relay.start()
        relayed = open_queue_at(cut.url(tmp_path, namespace, port), backend)
        try:
            # The same push once before the cut: connected, statements and scripts ready.
            await relayed.push_many([a_job() for _ in range(jobs)])
            before = await direct.size("default")
            relay.armed = True

            with pytest.raises(OutcomeUnknown, match="unknown"):
                await asyncio.wait_for(relayed.push_many([a_job() for _ in range(jobs)]), 60)

            assert relay.cut
            # Which is why it is not resent: the jobs are in exactly when the push
            # reached the server, and the client could not tell which.
            added = await direct.size("default") - before
            assert added == (jobs if deliver else 0), f"a push of {jobs}: {added} arrived"
        finally:
            await relayed.aclose()
            await relay.close()


def open_queue_at(url: str, backend: Backend) -> Queue:
    return open_url(url, backend.options, DriverContext())


# -- options -----------------------------------------------------------------------------


def misspelt(option: str) -> str:
    """`option` with its last two letters swapped: `prefix` -> `prefxi`."""
    return option[:-2] + option[-1] + option[-2]


def with_query(url: str, key: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{key}={value}"


async def test_a_misspelt_option_beside_the_url_is_refused_with_a_suggestion(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    with pytest.raises(UnknownOption, match="Did you mean `lease`"):
        open_url(url, {**backend.options, misspelt("lease"): "30s"}, DriverContext())


async def test_a_misspelt_option_in_the_url_is_refused_with_a_suggestion(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    base, _, query = url.partition("?")
    pairs = [pair.partition("=") for pair in query.split("&") if pair]
    own = [key for key, _, _ in pairs]
    # Every option the suite's own URL spells, then one every driver takes.
    for option in [*own, "lease"]:
        if option in own:
            spelt = [f"{misspelt(k) if k == option else k}={v}" for k, _, v in pairs]
            wrong = f"{base}?{'&'.join(spelt)}"
        else:
            wrong = with_query(url, misspelt(option), "30s")
        with pytest.raises(UnknownOption, match=f"Did you mean `{option}`"):
            open_url(wrong, backend.options, DriverContext())


async def test_options_given_beside_the_url_win_over_its_query(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = with_query(backend.url(tmp_path, namespace), "lease", "30s")
    queue = open_url(url, {**backend.options, "lease": "45s"}, DriverContext())
    try:
        assert queue.lease == timedelta(seconds=45)
    finally:
        await queue.aclose()


# -- namespaces --------------------------------------------------------------------------


@pytest.fixture
async def two_namespaces(backend: Backend, tmp_path: Path) -> AsyncIterator[tuple[Queue, Queue]]:
    """Two queues on one server (one file, for SQLite), each in a namespace of its own."""
    names = ["rq" + uuid.uuid4().hex[:12] for _ in range(2)]
    for name in names:
        backend.setup(tmp_path, name, ["default"])
    queues = [backend.open(tmp_path, name) for name in names]
    yield queues[0], queues[1]
    for queue in queues:
        await queue.aclose()
    if backend.cleanup is not None:
        for name in names:
            await backend.cleanup(tmp_path, name)


async def test_two_namespaces_on_one_server_never_see_each_others_jobs(
    two_namespaces: tuple[Queue, Queue],
) -> None:
    mine, theirs = two_namespaces
    await mine.push(a_job(payload="mine"))
    await mine.push(a_job(payload="failing"))

    assert await theirs.size("default") == 0
    assert await theirs.reserve("default") == []

    handled = []
    for _ in range(2):  # one at a time: on some drivers a held job holds up the next
        [reservation] = await reserve_all(mine, 1)
        handled.append(reservation.job.payload)
        if reservation.job.payload == "failing":
            await mine.fail(reservation, "fails on purpose")
        else:
            await mine.acknowledge(reservation)
    assert sorted(handled) == ["failing", "mine"]
    if isinstance(theirs, FailedJobStore) and isinstance(mine, FailedJobStore):
        assert [f.job.payload for f in await mine.failed_jobs()] == ["failing"]
        assert await theirs.failed_jobs() == [], "a failed job stays in its own namespace"

    await theirs.push(a_job(payload="theirs"))
    assert [r.job.payload for r in await reserve_all(theirs, 1)] == ["theirs"]
    assert await mine.reserve("default") == []


async def reserve_all(queue: Queue, count: int, *, within: float = 30) -> list[Reservation]:
    """Reserve until `count` jobs are held (a driver may hand out fewer per call)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    got: list[Reservation] = []
    while len(got) < count:
        assert loop.time() < deadline, f"only {len(got)} of {count} jobs were handed out"
        more = await queue.reserve("default", limit=count - len(got))
        got += more
        if not more:
            await asyncio.sleep(0.02)
    return got


async def drain(queue: Queue, count: int) -> list[Any]:
    """Reserve and acknowledge `count` jobs, one at a time; their payloads."""
    payloads = []
    for _ in range(count):
        [reservation] = await reserve_all(queue, 1)
        payloads.append(reservation.job.payload)
        await queue.acknowledge(reservation)
    return payloads


# -- a push from another process wakes an idle worker ------------------------------------

PUSH_FROM_ANOTHER_PROCESS = """
import asyncio, json, sys
from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob

async def main(url: str, count: int, payload: object) -> None:
    queue = open_queue(url)
    try:
        await queue.push_many([QueuedJob.create("woken", payload) for _ in range(count)])
    finally:
        await queue.aclose()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])))
"""


async def push_from_another_process(url: str, count: int, payload: object = "wake up") -> None:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", PUSH_FROM_ANOTHER_PROCESS, url, str(count), json.dumps(payload)],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


async def an_idle_wait(start: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T]:
    """A wait, started by `start`, that is still waiting 0.2 s later.

    A wait may return early with nothing to do (the port allows it: a
    Redis cluster's wait joins a BLPOP already under way), so one that did
    is started again, as an idle worker would; a wait that never settles
    down fails the test.
    """
    for _ in range(50):
        waiting = asyncio.create_task(start())
        await asyncio.sleep(0.2)
        if not waiting.done():
            return waiting
        waiting.result()
    raise AssertionError("every wait returned at once although nothing was pushed")


@pytest.mark.needs("processes")
@pytest.mark.parametrize("count", [1, 40], ids=["one-job", "a-batch"])
async def test_a_push_from_another_process_ends_an_idle_wait_for_work(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue, count: int
) -> None:
    queue = open_queue(**backend.wake_only)
    waiting = await an_idle_wait(lambda: queue.wait_for_work(["default"], LONG))

    await push_from_another_process(backend.url(tmp_path, namespace), count)

    await asyncio.wait_for(waiting, WOKEN_WITHIN)  # a liveness bound, not a latency
    assert await drain(queue, count) == ["wake up"] * count


@pytest.mark.needs("processes")
async def test_a_push_from_another_process_is_reserved_by_an_idle_wait_and_reserve(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    queue = open_queue(**backend.wake_only)
    waiting = await an_idle_wait(lambda: queue.wait_and_reserve("default", LONG, limit=5))

    await push_from_another_process(backend.url(tmp_path, namespace), 1)

    got = await asyncio.wait_for(waiting, WOKEN_WITHIN)  # a liveness bound, not a latency
    assert [r.job.payload for r in got] == ["wake up"]


class Woken(Job):
    name = "woken"
    text: str

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(asyncio.Event).set()


@pytest.mark.needs("processes")
async def test_an_idle_worker_starts_a_job_pushed_from_another_process(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    """The whole path, as deployed: a worker that sleeps a minute (on a driver that also
    polls, its poll a minute apart too) runs a job pushed by another process at once."""
    backend.setup(tmp_path, namespace, ["default"])
    queue = open_queue(**backend.wake_only)
    ran = asyncio.Event()
    options = WorkerOptions(sleep=LONG, concurrency=4)
    worker = Worker(queue, JobRegistry([Woken]), options, dependencies=Dependencies([ran]))
    running = asyncio.create_task(worker.run())
    try:
        await queue.size("default")  # connected, and the tables or topics exist
        await asyncio.sleep(1)  # the worker is in its idle wait
        assert not running.done()
        await push_from_another_process(backend.url(tmp_path, namespace), 1, {"text": "hi"})
        await asyncio.wait_for(ran.wait(), WOKEN_WITHIN)  # a liveness bound, not a latency
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(running, 60)
    assert worker.stats.total == 1
