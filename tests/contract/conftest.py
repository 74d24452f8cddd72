# SPDX-License-Identifier: MIT
"""The contract suite's fixtures: every test runs on every driver."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from rainier_queue.queue import Queue

from .backends import BACKENDS, Backend, choose

DRIVERS = [pytest.param(name, id=name) for name in BACKENDS]

OpenQueue = Callable[..., Queue]


@pytest.fixture(params=DRIVERS)
def backend(request: pytest.FixtureRequest) -> Backend:
    return choose(request)


@pytest.fixture
async def namespace(backend: Backend, tmp_path: Path) -> AsyncIterator[str]:
    """A name no other test uses; what a test made under it is removed after, even when the
    test made it through a URL alone (on a broker, queues left behind cost the server)."""
    name = "rq" + uuid.uuid4().hex[:12]
    yield name
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, name)


@pytest.fixture
async def open_queue(backend: Backend, tmp_path: Path, namespace: str) -> AsyncIterator[OpenQueue]:
    """Open (or reopen) the driver on this test's namespace; everything is closed after."""
    opened: list[Queue] = []

    def opener(*, lease: timedelta | None = None, **options: Any) -> Queue:
        queue = backend.open(tmp_path, namespace, lease=lease, **options)
        opened.append(queue)
        return queue

    yield opener
    for queue in opened:
        await queue.aclose()
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


@pytest.fixture
def queue(open_queue: OpenQueue) -> Queue:
    """A fresh, empty queue on a namespace no other test uses."""
    return open_queue()


@pytest.fixture
def short_lease_queue(open_queue: OpenQueue) -> Queue:
    """A queue whose reservations lapse quickly, for reclaim tests."""
    return open_queue(lease=SHORT_LEASE)


SHORT_LEASE = timedelta(milliseconds=300)
