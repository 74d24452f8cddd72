# SPDX-License-Identifier: MIT
"""Fixtures the fault tests share: `partition`, a network the test can silence, and `backend`.

`backend` is the contract suite's (tests/contract/backends.py): a fault test
that takes it runs on every driver, skipped where the driver lacks a hook
the test names in `@pytest.mark.needs(...)`, with the driver's reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..contract.backends import BACKENDS, Backend, choose
from ..partition import Partition


@pytest.fixture(params=[pytest.param(name, id=name) for name in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    return choose(request)


@pytest.fixture
def partition() -> Iterator[Partition]:
    """A network namespace for the client, joined to the servers' by a cable (see partition.py)."""
    net = Partition()
    try:
        yield net
    finally:
        net.remove()
