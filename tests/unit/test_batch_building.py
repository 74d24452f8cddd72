# SPDX-License-Identifier: MIT
"""Building a batch, faking it, and the blocking facade: a batch refuses what it could never
finish, the fake's `run_all` records a batch's jobs as a worker does and runs the callbacks
that apply, and code with no event loop dispatches and reads a batch."""

from __future__ import annotations

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
from rainier_queue.drivers.memory import MemoryQueue


class Seen(list[object]):
    """What the jobs here did, in order."""


class Piece(Job):
    name = "piece"
    tries = 1
    n: int
    fail: bool = False

    def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Seen).append(self.n)
        if self.fail:
            raise RuntimeError("piece failed")


class Told(Job):
    name = "told"
    kind: str

    def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Seen).append((self.kind, ctx.batch))


class OnlyOnce(Piece):
    name = "only-once"

    def unique_id(self) -> str:
        return str(self.n)


REGISTRY = JobRegistry([Piece, Told, OnlyOnce])


def test_a_batch_needs_a_job_and_one_callback_of_each_kind() -> None:
    with pytest.raises(ValueError, match="at least one job"):
        batch([])
    with pytest.raises(ValueError, match="has a `then` callback already"):
        batch([Piece(n=1)]).then(Told(kind="a")).then(Told(kind="b"))
    with pytest.raises(TypeError, match="batch job 2 is a str, not a Job"):
        batch([Piece(n=1), "oops"])  # type: ignore[list-item]


def test_a_unique_job_is_refused_in_a_batch_and_as_its_callback() -> None:
    with pytest.raises(ValueError, match="batch job 1, `only-once`, is a unique job"):
        batch([OnlyOnce(n=1)])
    with pytest.raises(ValueError, match="the batch's `finally_`, `only-once`, is a unique job"):
        batch([Piece(n=1)]).finally_(OnlyOnce(n=2))


async def test_the_fakes_run_all_runs_then_with_the_counts_once_every_job_succeeded() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    seen = Seen()
    batch_id = await (
        batch([Piece(n=1), Piece(n=2)])
        .then(Told(kind="then"))
        .catch(Told(kind="catch"))
        .dispatch(fake)
    )

    await fake.run_all(dependencies=Dependencies([seen]))

    assert seen == [1, 2, ("then", BatchCounts(batch_id, 2, 2, 0, 0))]
    assert (await fake.batch(batch_id)).finished


async def test_the_fakes_run_all_runs_catch_when_a_job_failed() -> None:
    fake = QueueManager.fake(registry=REGISTRY)
    seen = Seen()
    batch_id = await (
        batch([Piece(n=1, fail=True), Piece(n=2)])
        .then(Told(kind="then"))
        .catch(Told(kind="catch"))
        .dispatch(fake)
    )

    await fake.run_all(dependencies=Dependencies([seen]), raise_failures=False)

    assert seen == [1, 2, ("catch", BatchCounts(batch_id, 2, 1, 1, 0))]


def test_the_blocking_facade_dispatches_a_batch_and_reads_its_progress() -> None:
    queue = MemoryQueue()
    with QueueManager(queue).blocking() as blocking:
        batch_id = blocking.dispatch_batch(batch([Piece(n=1), Piece(n=2)]).then(Told(kind="t")))
        progress = blocking.batch(batch_id)
        assert (progress.total, progress.pending, progress.finished) == (2, 2, False)
        assert progress.callbacks == (("then", "told"),)
        assert blocking.size("default") == 2
        with pytest.raises(LookupError, match="no batch nope"):
            blocking.batch("nope")
