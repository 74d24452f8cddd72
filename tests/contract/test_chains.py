# SPDX-License-Identifier: MIT
"""Chains on every driver, both ways round `push_creates_resources`: a chain with a later
step on a queue nobody provisioned is refused at dispatch where a push would be refused,
and a step whose next step cannot be queued fails, saying so, instead of stalling its
worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rainier_queue import Dependencies, Job, JobContext, JobRegistry, QueueManager, chain
from rainier_queue.errors import NotProvisioned
from rainier_queue.queue import FailedJobListing, Queue
from rainier_queue.worker import Worker, WorkerOptions

from .backends import Backend


class Link(Job):
    name = "link"
    tries = 1
    text: str

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(list).append(self.text)


class Elsewhere(Link):
    name = "link-elsewhere"
    queue = "never-provisioned"


REGISTRY = JobRegistry([Link, Elsewhere])


@pytest.fixture
def ready(backend: Backend, tmp_path: Path, namespace: str, queue: Queue) -> Queue:
    backend.setup(tmp_path, namespace, ["default"])
    return queue


async def test_a_chain_with_a_step_on_an_unprovisioned_queue_is_refused_where_pushes_would_be(
    ready: Queue,
) -> None:
    links = chain(Link(text="a"), Elsewhere(text="b"))

    if ready.capabilities.push_creates_resources:
        assert await links.dispatch(QueueManager(ready)) is not None
        assert await ready.size("default") == 1
        return
    with pytest.raises(NotProvisioned, match="rainier-queue provision --queue never-provisioned"):
        await links.dispatch(QueueManager(ready))
    assert await ready.size("default") == 0, "nothing queued"


async def test_a_step_whose_next_step_cannot_be_queued_fails_saying_so(ready: Queue) -> None:
    # The chain as dispatch writes it, recorded by the fake, then pushed as it is: what a
    # queue deprovisioned after the dispatch, or another program's chain, would leave.
    fake = QueueManager.fake(registry=REGISTRY)
    await chain(Link(text="a"), Elsewhere(text="b")).dispatch(fake)
    [first] = fake.all_pushed()
    await ready.push(first)
    ran: list[str] = []
    options = WorkerOptions(stop_when_empty=True, drain_wait=None)
    worker = Worker(ready, REGISTRY, options, dependencies=Dependencies([ran]))

    await asyncio.wait_for(worker.run(), 120)

    assert ran == ["a"]
    if ready.capabilities.push_creates_resources:
        assert await ready.size("never-provisioned") == 1, "the next step was queued"
        return
    assert worker.stats.failed == 1
    if ready.capabilities.failed_listing and isinstance(ready, FailedJobListing):
        [failed] = await ready.failed_jobs(queue="default")
        assert "the next step of its chain, `link-elsewhere`, cannot be queued" in failed.error
        assert "step 1 of 2 of chain" in failed.error
