# SPDX-License-Identifier: MIT
"""The outbox into RabbitMQ, from each SQL store: the application killed between its commit
and the relay, then a relay killed mid-batch; every committed dispatch arrives and no
rolled-back one does (crash.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .crash import killed_application_then_killed_relay


@pytest.mark.slow
@pytest.mark.timeout(240)  # processes started, killed and waited out
@pytest.mark.parametrize("store", ["postgres", "mysql", "sqlite"])
async def test_committed_dispatches_reach_rabbitmq_through_killed_processes(
    store: str, tmp_path: Path
) -> None:
    await killed_application_then_killed_relay(store, "rabbitmq", tmp_path)
