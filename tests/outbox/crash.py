# SPDX-License-Identifier: MIT
"""The crash test every store and target run: the application killed between its commit
and the relay, then a relay killed mid-batch; every committed order's job arrives, and
no rolled-back one does."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from .harness import (
    REPO,
    arrived,
    committed_orders,
    killed_at_exit,
    outbox_left,
    outbox_setup,
    relay_everything,
)

COMMITS = 60
"""Commits the application makes before it is killed (it may make one more)."""


async def _lines_until(process: subprocess.Popen[bytes], count: int) -> None:
    """Read the application's output until it said it committed `count` orders."""
    assert process.stdout is not None
    said = 0
    while said < count:
        line = await asyncio.to_thread(process.stdout.readline)
        if not line:
            _, err = process.communicate()
            raise AssertionError(f"the application stopped: {err.decode()[-2000:]}")
        said += line.startswith(b"committed")


DROPS_DUPLICATES_BY_ID = {"nats"}
"""Targets that drop a second push of a job id (NATS's message id, within its duplicate
window): there every committed dispatch arrives exactly once, a killed relay or not."""


async def killed_application_then_killed_relay(store: str, target: str, tmp: Path) -> None:
    async with outbox_setup(store, target, tmp) as setup:
        app = await asyncio.to_thread(
            subprocess.Popen,
            [
                sys.executable,
                "-m",
                "tests.outbox.application",
                store,
                str(setup.config),
                setup.table,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        with killed_at_exit(app):
            await _lines_until(app, COMMITS)
            os.kill(app.pid, signal.SIGKILL)  # no relay runs yet: its jobs wait in the outbox
            app.wait()
        committed = await committed_orders(setup)
        assert len(committed) >= COMMITS
        assert await outbox_left(setup) == len(committed), "one outbox row per committed order"

        relay = setup.cli("relay", "--batch", "5")
        with killed_at_exit(relay):
            landing = setup.target_queue()
            try:
                while await landing.size("default") == 0:
                    assert relay.poll() is None, (
                        relay.stderr.read().decode() if relay.stderr else ""
                    )
                    await asyncio.sleep(0.01)  # a poll: kill it as soon as a batch landed
            finally:
                await landing.aclose()
            os.kill(relay.pid, signal.SIGKILL)  # its first batch landed; it holds the next
            relay.wait()

        await relay_everything(setup)
        seen = await arrived(setup, committed)

        assert set(seen) == committed, (
            f"arrived but rolled back: {sorted(set(seen) - committed)}; "
            f"committed but missing: {sorted(committed - set(seen))}"
        )
        assert not [order for order in seen if order % 3 == 0], "a rolled-back order's job arrived"
        if target in DROPS_DUPLICATES_BY_ID:
            twice = {order: count for order, count in seen.items() if count != 1}
            assert not twice, f"{target} took a job id twice: {twice}"
