# SPDX-License-Identifier: MIT
"""What is SQS's own in its batches: on a FIFO queue a callback sent again under its id is
dropped (its id is the deduplication id), on a standard queue it is a second copy.

The finishing job's worker dies between sending the callbacks and marking them sent (the
one gap of `cached_batches.py` that sends twice), and the job is recorded again, as its
redelivery is. SQS drops the repeat for 5 minutes whether or not the first copy was
consumed; moto only while the first copy still waits, which is what is checked here (the
contract backend says so in `lacks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("aiobotocore")

from rainier_queue.batchstate import (
    Callback,
    Member,
    Outcome,
    batch_store_of,
    callback_id,
    repeats_dropped_within,
)
from rainier_queue.drivers.cached_batches import CacheBatches
from rainier_queue.drivers.sqs import SQSQueue
from rainier_queue.envelope import QueuedJob

from ..contract.jobs import a_job
from .conftest import SQSOpener as Opener


class Died(Exception):
    """The worker died here."""


async def _recorded_twice(queue: SQSQueue, batch_id: str) -> None:
    """Open a batch of one job; record the job, dying right after its callback was sent;
    record it again, as its rerun does."""
    await queue.provision(["default"])
    store = batch_store_of(queue)
    assert isinstance(store, CacheBatches)
    then = a_job(name="batch-called").with_changes(id=callback_id(batch_id, "then"))
    await store.open_batch(batch_id, 1, [Callback.of("then", then)])
    last = Member(batch_id, ("default",))
    send = store._push_many

    async def send_then_die(jobs: Sequence[QueuedJob]) -> object:
        await send(jobs)
        raise Died

    store._push_many = send_then_die
    with pytest.raises(Died):
        await store.record_in_batch(last, "last", Outcome.SUCCEEDED)
    store._push_many = send
    progress = await store.record_in_batch(last, "last", Outcome.SUCCEEDED)  # the rerun
    assert progress is not None
    assert progress.finished


async def test_on_a_fifo_queue_a_callback_sent_again_while_the_first_waits_is_dropped(
    open_sqs: Opener,
    tmp_path: Path,
) -> None:
    queue = open_sqs(fifo=True, locks=f"sqlite:///{tmp_path / 'locks.db'}")
    assert queue.capabilities.batches
    assert not queue.capabilities.batch_callbacks_exactly_once
    assert repeats_dropped_within(queue) == timedelta(minutes=5)

    await _recorded_twice(queue, "fifo-batch")

    assert await queue.size("default") == 1, "sent again within the interval: dropped"
    [callback] = await queue.reserve("default", limit=2)
    assert callback.job.id == "fifo-batch.then"


async def test_on_a_standard_queue_a_callback_sent_again_is_a_second_copy(
    open_sqs: Opener,
    tmp_path: Path,
) -> None:
    queue = open_sqs(fifo=False, locks=f"sqlite:///{tmp_path / 'locks.db'}")
    assert queue.capabilities.batches
    assert repeats_dropped_within(queue) is None

    await _recorded_twice(queue, "standard-batch")

    assert await queue.size("default") == 2, "a standard queue drops no repeat"
