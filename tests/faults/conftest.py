# SPDX-License-Identifier: MIT
"""Fixtures the fault tests share: `partition`, a network the test can silence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..partition import Partition


@pytest.fixture
def partition() -> Iterator[Partition]:
    """A network namespace for the client, joined to the servers' by a cable (see partition.py)."""
    net = Partition()
    try:
        yield net
    finally:
        net.remove()
