# SPDX-License-Identifier: MIT
"""Fixtures the fault tests share: `partition`, a network the test can silence, `backend`,
and `url`, a namespace of the test's own on it.

`backend` is the contract suite's (tests/contract/backends.py): a fault test
that takes it runs on every driver, skipped where the driver lacks a hook
the test names in `@pytest.mark.needs(...)`, with the driver's reason.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ..contract.backends import BACKENDS, Backend, choose
from ..partition import Partition


@pytest.fixture(params=[pytest.param(name, id=name) for name in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    return choose(request)


@pytest.fixture
async def url(backend: Backend, tmp_path: Path) -> AsyncIterator[str]:
    """The backend's URL for a namespace of the test's own, its `default` queue made, removed
    after the test. A file whose tests need more (another queue, a capability checked)
    defines its own `url`."""
    namespace = "rqf" + uuid.uuid4().hex[:10]
    backend.setup(tmp_path, namespace, ["default"])
    yield backend.url(tmp_path, namespace)
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


@pytest.fixture
def partition() -> Iterator[Partition]:
    """A network namespace for the client, joined to the servers' by a cable (see partition.py)."""
    net = Partition()
    try:
        yield net
    finally:
        net.remove()
