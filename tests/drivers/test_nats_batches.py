# SPDX-License-Identifier: MIT
"""What is NATS's own in its batches: a callback published again under its id is dropped
within the stream's duplicate window and queued again after it.

The finishing job's worker dies between publishing the callbacks and marking them
published (the one gap of `cached_batches.py` that publishes twice), and the job is
recorded again, as its redelivery is: at once (the first copy already run and deleted),
the second publish is a duplicate the server drops; after the window has passed, it is
a second copy of the callback. The
window here is 1 s (an option of the stream), so the wait for it stays short.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue.batchstate import Callback, DropsRepeatedCallbacks, Member, Outcome, callback_id
from rainier_queue.envelope import QueuedJob

from ..contract.backends import BACKENDS  # first: it imports every backend_*.py in turn

# isort: split
from ..contract.backend_nats import _provision, check, cleanup
from ..contract.jobs import a_job
from .test_nats_fencing import nats_queue

assert "nats" in BACKENDS

WINDOW = "1s"


class Died(Exception):
    """The worker died here."""


@pytest.fixture
async def namespace(tmp_path: Path) -> AsyncIterator[str]:
    check()
    name = "rqn" + uuid.uuid4().hex[:10]
    await asyncio.to_thread(
        _provision, "nats://127.0.0.1:4222", name, ["default"], f"&duplicate_window={WINDOW}"
    )
    yield name
    await cleanup(tmp_path, name)


def _then(batch_id: str) -> Callback:
    """The batch's `then`, under the id `batch(...).dispatch` gives it."""
    return Callback.of(
        "then", a_job(name="batch-called").with_changes(id=callback_id(batch_id, "then"))
    )


async def _finish_dying_after_the_publish(queue: object, batch: Member) -> None:
    """Record the batch's last job, dying right after its callbacks were published."""
    batches = queue.batch_store  # type: ignore[attr-defined]
    publish = batches._push_many

    async def publish_then_die(jobs: Sequence[QueuedJob]) -> object:
        await publish(jobs)
        raise Died

    batches._push_many = publish_then_die
    try:
        with pytest.raises(Died):
            await batches.record_in_batch(batch, "last", Outcome.SUCCEEDED)
    finally:
        batches._push_many = publish


async def test_a_callback_published_again_is_dropped_within_the_window_and_not_after(
    namespace: str,
) -> None:
    queue = nats_queue(namespace, duplicate_window=WINDOW)
    try:
        assert isinstance(queue, DropsRepeatedCallbacks)
        assert queue.repeat_window == timedelta(seconds=1)
        await queue.batch_store.open_batch("within", 1, [_then("within")])
        within = Member("within", ("default",))
        await _finish_dying_after_the_publish(queue, within)
        [ran] = await queue.reserve("default")  # the callback runs and is deleted meanwhile
        assert ran.job.id == "within.then"
        await queue.acknowledge(ran)
        progress = await queue.batch_store.record_in_batch(
            within, "last", Outcome.SUCCEEDED
        )  # the rerun
        assert progress is not None
        assert progress.finished
        assert await queue.size("default") == 0, "published again within the window: dropped"

        await queue.batch_store.open_batch("after", 1, [_then("after")])
        after = Member("after", ("default",))
        await _finish_dying_after_the_publish(queue, after)
        await asyncio.sleep(3)  # the window (1 s) passes, with room for the server's sweep
        progress = await queue.batch_store.record_in_batch(after, "last", Outcome.SUCCEEDED)
        assert progress is not None
        assert progress.finished
        assert await queue.size("default") == 2, "published again after the window: a copy"
        ids = [r.job.id for r in await queue.reserve("default", limit=3)]
        assert ids == ["after.then", "after.then"]
    finally:
        await queue.aclose()
