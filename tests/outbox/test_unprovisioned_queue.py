# SPDX-License-Identifier: MIT
"""A job bound for a queue the target has not provisioned (a Kafka topic nobody made)
waits in the outbox while the rest go on, and goes once `provision` made the queue."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from rainier_queue.envelope import QueuedJob
from rainier_queue.outbox import Relay, RelaySettings
from rainier_queue.queue import Provisionable

from .application import Placed
from .harness import arrived, outbox_setup

LATE = "outbox-late"
"""A queue the contract suite's Kafka namespaces do not provision."""


async def test_a_job_for_an_unprovisioned_queue_waits_while_the_rest_go_on(
    tmp_path: Path,
) -> None:
    async with outbox_setup("sqlite", "kafka", tmp_path) as setup:
        outbox = setup.outbox()
        app = await setup.app()
        late = QueuedJob.create("placed", {"order": 2}, queue=LATE)
        late_id = await outbox.dispatch_in(app.connection, late)
        await outbox.dispatch_in(app.connection, Placed(order=1))
        await app.commit()
        await app.close()

        target = setup.target_queue()
        relay = Relay(outbox, target, RelaySettings(max_backoff=timedelta(milliseconds=500)))
        try:
            await relay.drain()
            assert await outbox.pending() == 1, "the late job waits in the outbox"
            assert dict(await arrived(setup, {1})) == {1: 1}

            assert isinstance(target, Provisionable)
            await target.provision([LATE])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while await outbox.pending():
                assert loop.time() < deadline, "the late job never left the outbox"
                if not await relay.drain():
                    await asyncio.sleep(0.1)  # its row is due again after max_backoff
            [got] = await target.reserve(LATE)
            assert got.job.id == late_id
            await target.acknowledge(got)
        finally:
            await target.aclose()
            await outbox.aclose()
