# SPDX-License-Identifier: MIT
"""The outbox from a Django application: `django.db.connection` handed to
`dispatch_in_sync` inside `transaction.atomic()`, no `on_commit` hook; the row commits
and rolls back with the application's own (django_app.py, in a process of its own)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from rainier_queue.outbox import Relay

from .harness import REPO, arrived, committed_orders, outbox_setup


@pytest.mark.parametrize("store", ["postgres", "sqlite"])
async def test_a_django_atomic_block_commits_and_rolls_back_the_outbox_row(
    store: str, tmp_path: Path
) -> None:
    async with outbox_setup(store, "redis", tmp_path) as setup:
        done = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "tests.outbox.django_app",
                store,
                str(setup.config),
                setup.table,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert await committed_orders(setup) == {1}

        outbox, target = setup.outbox(), setup.target_queue()
        try:
            assert await Relay(outbox, target).drain() == 1
        finally:
            await outbox.aclose()
            await target.aclose()
        assert dict(await arrived(setup, {1})) == {1: 1}
