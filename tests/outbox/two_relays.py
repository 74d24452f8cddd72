# SPDX-License-Identifier: MIT
"""10,000 dispatches committed, then relayed by two relay processes side by side: each
job arrives exactly once (no relay is killed here, so nothing is pushed twice)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from .application import Placed
from .harness import arrived, killed_at_exit, outbox_left, outbox_setup

DISPATCHES = 10_000
PER_TRANSACTION = 1_000


async def two_relays_deliver_each_job_once(store: str, target: str, tmp: Path) -> None:
    # A lease no batch outlasts on a loaded machine: no row is taken from a live relay.
    async with outbox_setup(store, target, tmp, lease="120s") as setup:
        outbox = setup.outbox()
        app = await setup.app()
        try:
            for start in range(0, DISPATCHES, PER_TRANSACTION):
                jobs = [Placed(order=n) for n in range(start, start + PER_TRANSACTION)]
                await outbox.dispatch_many_in(app.connection, jobs)
                await app.commit()
                if app.kind == "mysql":
                    await app.connection.begin()
        finally:
            await app.close()
            await outbox.aclose()
        assert await outbox_left(setup) == DISPATCHES

        relays = [setup.cli("relay", "--batch", "250") for _ in range(2)]
        with killed_at_exit(*relays):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 240
            while await outbox_left(setup):
                for relay in relays:
                    assert relay.poll() is None, (
                        relay.stderr.read().decode() if relay.stderr else ""
                    )
                assert loop.time() < deadline, "two relays did not empty the outbox"
                await asyncio.sleep(0.25)  # a poll of the outbox, not a wait for an event
            for relay in relays:
                os.kill(relay.pid, signal.SIGTERM)
            for relay in relays:
                assert await asyncio.to_thread(relay.wait) == 0

        seen = await arrived(setup, set(range(DISPATCHES)))
        assert set(seen) == set(range(DISPATCHES))
        twice = {order: count for order, count in seen.items() if count != 1}
        assert not twice, f"arrived more than once: {list(twice.items())[:10]}"
