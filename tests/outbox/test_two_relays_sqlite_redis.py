# SPDX-License-Identifier: MIT
"""10,000 dispatches from sqlite into redis through two relay processes, each arriving once
(two_relays.py); a file of its own so the test suite's processes spread them."""

from __future__ import annotations

from pathlib import Path

import pytest

from .two_relays import two_relays_deliver_each_job_once


@pytest.mark.slow
@pytest.mark.timeout(300)  # 10,000 jobs on a loaded machine
async def test_two_relays_deliver_10000_sqlite_dispatches_to_redis_once_each(
    tmp_path: Path,
) -> None:
    await two_relays_deliver_each_job_once("sqlite", "redis", tmp_path)
