# SPDX-License-Identifier: MIT
"""What only the NATS driver has: its own fencing of stale settles, and the mover of messages
the server stopped delivering (max_deliver), from the advisory and from the sweep."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import nats.errors
import pytest

from rainier_queue.connections import open_queue
from rainier_queue.drivers.nats import NATSQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import LeaseLost

from ..contract.backends import BACKENDS  # first: it imports every backend_*.py in turn

# isort: split
from ..contract.backend_nats import SERVER, check, cleanup, prepare

assert "nats" in BACKENDS


@pytest.fixture
async def namespace(tmp_path: Path) -> AsyncIterator[str]:
    check()
    name = "rqf" + uuid.uuid4().hex[:10]
    prepare(tmp_path, name, ["default"])
    yield name
    await cleanup(tmp_path, name)


def nats_queue(namespace: str, **options: str) -> NATSQueue:
    queue = open_queue(f"{SERVER}/?prefix={namespace}", options)
    assert isinstance(queue, NATSQueue)
    return queue


async def reserve_one(queue: NATSQueue, within: float = 10.0) -> object:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        got = await queue.reserve("default")
        if got:
            return got[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no job came")


async def ask_without_listening(namespace: str) -> None:
    """One pull request from a bare client: the server checks the delivery limit then."""
    client = await nats.connect(SERVER)
    try:
        js = client.jetstream()
        sub = await js.pull_subscribe_bind("q-default", stream=f"{namespace}-jobs")
        with contextlib.suppress(nats.errors.TimeoutError):
            await sub.fetch(1, timeout=1)
    finally:
        await client.close()


async def test_a_worker_that_overran_its_lease_does_not_delete_the_job_a_second_worker_runs(
    namespace: str,
) -> None:
    first, second = nats_queue(namespace, lease="1s"), nats_queue(namespace, lease="1s")
    try:
        job = QueuedJob.create("slow", {})
        await first.push(job)
        stale = await reserve_one(first)
        await asyncio.sleep(1.3)  # the first worker overran its lease
        current = await reserve_one(second)

        for settle in (first.acknowledge, first.renew):
            with pytest.raises(LeaseLost):
                await settle(stale)  # type: ignore[arg-type]
        with pytest.raises(LeaseLost):
            await first.fail(stale, "late")  # type: ignore[arg-type]
        with pytest.raises(LeaseLost):
            await first.release(stale)  # type: ignore[arg-type]

        # Nothing reached the server: the job is still the second worker's to settle.
        counts = await second.counts("default")
        assert counts.reserved == 1, "the stale ack must not have deleted the running job"
        await second.acknowledge(current)  # type: ignore[arg-type]
        assert (await second.counts("default")).total == 0
        assert await second.failed_jobs() == []
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_message_the_server_stopped_delivering_is_moved_to_the_failed_store_by_the_advisory(
    tmp_path: Path,
) -> None:
    check()
    name = "rqm" + uuid.uuid4().hex[:10]
    setup = nats_queue(name, lease="0.3s", max_deliver="2")
    try:
        await setup.provision(["default"])
        worker = nats_queue(name, lease="0.3s", max_deliver="2", sweep_every="1h")
        try:
            job = QueuedJob.create("crashes", {}, max_attempts=5)
            await worker.push(job)
            await reserve_one(worker)  # delivery 1: its worker "dies"
            await asyncio.sleep(0.5)
            await reserve_one(worker)  # delivery 2, the last the consumer allows
            for _ in range(100):
                await worker.reserve("default")  # a worker keeps asking, as workers do
                failed = await worker.failed_jobs()
                if failed:
                    break
                await asyncio.sleep(0.1)
            assert [f.job.id for f in failed] == [job.id]
            assert "max_deliver" in failed[0].error
            assert (await worker.counts("default")).total == 0
        finally:
            await worker.aclose()
    finally:
        await setup.aclose()
        await cleanup(tmp_path, name)


async def test_a_message_whose_advisory_was_missed_is_moved_by_the_sweep(tmp_path: Path) -> None:
    check()
    name = "rqs" + uuid.uuid4().hex[:10]
    setup = nats_queue(name, lease="0.3s", max_deliver="2")
    try:
        await setup.provision(["default"])
        job = QueuedJob.create("crashes", {}, max_attempts=5)
        await setup.push(job)
        dying = nats_queue(name, lease="0.3s", max_deliver="2", sweep_every="1h")
        await reserve_one(dying)
        await asyncio.sleep(0.5)
        await reserve_one(dying)
        await dying.aclose()  # gone before the advisory could be acted on, or missed it
        await asyncio.sleep(0.5)
        await ask_without_listening(name)  # the server gives up on it, and nobody hears
        info = await setup._provisioning.consumer(setup.names.consumer("default"))
        assert info is not None
        assert info.num_pending == 0
        assert info.num_ack_pending == 0

        sweeper = nats_queue(name, lease="0.3s", max_deliver="2", sweep_every="1h")
        try:
            failed_before = await sweeper.failed_jobs()
            moved = await sweeper.sweep("default") if not failed_before else 1
            failed = await sweeper.failed_jobs()
            assert moved == 1 or failed_before
            assert [f.job.id for f in failed] == [job.id]
        finally:
            await sweeper.aclose()
    finally:
        await setup.aclose()
        await cleanup(tmp_path, name)
