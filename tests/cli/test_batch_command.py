# SPDX-License-Identifier: MIT
"""`batch ID`, run as a user runs it: a batch's progress by id, before and after a worker
ran it, in words and as JSON; an unknown id and a connection that keeps no batches are
answered with what to do."""

from __future__ import annotations

import asyncio

from rainier_queue import QueueManager, batch
from rainier_queue.connections import open_queue

from .harness import Cli, no_traceback
from .sample_jobs import Boom, Note


def dispatched(cli: Cli) -> str:
    """A batch of two notes and a failing job, with a `then` and a `catch`, on `cli`'s file."""

    async def dispatch() -> str:
        queue = open_queue(cli.url)
        try:
            return await (
                batch([Note(text="a"), Note(text="b"), Boom()])
                .then(Note(text="all went well"))
                .catch(Note(text="some did not"))
                .dispatch(QueueManager(queue))
            )
        finally:
            await queue.aclose()

    return asyncio.run(dispatch())


def test_batch_shows_a_batchs_progress_and_its_end(cli: Cli) -> None:
    batch_id = dispatched(cli)

    before = cli("batch", batch_id)
    worked = cli("work", "--stop-when-empty", "--drain-wait", "0s")
    after = cli("batch", batch_id, "--json")

    assert before.code == 0, before.output
    assert f"batch {batch_id}: 0 of 3 finished" in before.stdout
    assert "3 pending" in before.stdout
    assert "then: note" in before.stdout
    assert worked.code == 1, worked.output  # a job failed
    assert after.code == 1, "a finished batch where a job did not succeed exits 1"
    shown = after.json()
    assert (shown["succeeded"], shown["failed"], shown["pending"]) == (2, 1, 0)
    assert shown["finished"] is True
    assert shown["queued_callbacks"] == ["catch"]


def test_batch_of_an_unknown_id_says_where_it_might_be(cli: Cli) -> None:
    unknown = cli("batch", "no-such-batch")

    assert unknown.code == 4, unknown.output
    assert "no batch no-such-batch on this connection" in unknown.stderr
    assert no_traceback(unknown)


def test_batch_on_a_connection_that_keeps_none_is_refused_saying_why() -> None:
    refused = Cli("sync://")("batch", "anything")

    assert refused.code == 2, refused.output
    assert "cannot keep a batch: the sync driver" in refused.stderr
    assert no_traceback(refused)
