# SPDX-License-Identifier: MIT
"""A pytest plugin, so an application's tests get a faked manager without writing one.

Installing rainier-queue registers it (the `pytest11` entry point), and it
adds fixtures only: nothing runs unless a test asks for one.

```python
async def test_signing_up_sends_a_welcome(fake_queue_manager):
    await signup(fake_queue_manager, email="a@b.c")
    fake_queue_manager.assert_pushed(SendWelcome, times=1)
```

A test gets a fresh manager, so what one test dispatched never shows in
the next. Code that dispatches through named connections needs them
declared, as on a real manager; override `fake_queue_connections` (in a
conftest, or in one module) to name them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from .manager import QueueManager
from .registry import JobRegistry
from .testing import FakeQueueManager


@pytest.fixture
def fake_queue_connections() -> Sequence[str]:
    """Connection names the fake manager declares besides its default: none."""
    return ()


@pytest.fixture
def fake_queue_registry() -> JobRegistry | None:
    """The registry the fake manager carries: none, which is an empty one."""
    return None


@pytest.fixture
def fake_queue_manager(
    fake_queue_connections: Sequence[str], fake_queue_registry: JobRegistry | None
) -> FakeQueueManager:
    """A `QueueManager.fake()`: it records what the code under test dispatches."""
    return QueueManager.fake(connections=fake_queue_connections, registry=fake_queue_registry)


__all__ = ["fake_queue_connections", "fake_queue_manager", "fake_queue_registry"]
