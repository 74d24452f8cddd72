# SPDX-License-Identifier: MIT
"""A pytest plugin, so an application's tests get a faked manager without writing one.

Installing rainier-queue registers it (the `pytest11` entry point), and it
adds fixtures only: nothing runs unless a test asks for one.

A plain `def` test needs nothing more. Code under test that dispatches
without an event loop (a Django or Flask view) is handed the fake's
blocking facade, and `run_all_sync()` then runs what was recorded through
the registry's handlers:

```python
@pytest.fixture
def fake_queue_registry():
    return registry                        # the application's JobRegistry


def test_signing_up_sends_a_welcome(fake_queue_manager):
    signup_view(fake_queue_manager.blocking(), email="a@b.c")
    fake_queue_manager.assert_pushed(SendWelcome, times=1)
    fake_queue_manager.run_all_sync()      # SendWelcome.handle runs here
    assert outbox == ["a@b.c"]
```

An `async def` test needs pytest-asyncio (`pip install pytest-asyncio`)
and, in `pyproject.toml`, `[tool.pytest.ini_options]` with
`asyncio_mode = "auto"` and `asyncio_default_fixture_loop_scope =
"function"` (or `@pytest.mark.asyncio` on each test). Without such a plugin
pytest fails the test: "async def functions are not natively supported".

```python
async def test_signing_up_sends_a_welcome(fake_queue_manager):
    await signup(fake_queue_manager, email="a@b.c")
    fake_queue_manager.assert_pushed(SendWelcome, times=1)
    await fake_queue_manager.run_all()
    assert outbox == ["a@b.c"]
```

`run_all` raises the error of a job that fails for good (after its
attempts and its `failed` hook); `run_all(raise_failures=False)` returns
what became of each job instead (`rainier_queue.testing` says more).

A test gets a fresh manager, so what one test dispatched never shows in
the next; its blocking facade, if the test used it, is closed after the
test. Code that dispatches through named connections needs them declared,
as on a real manager; override `fake_queue_connections` (in a conftest, or
in one module) to name them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
    """The registry the fake manager carries (and `run_all` runs through): none, an empty one."""
    return None


@pytest.fixture
def fake_queue_manager(
    fake_queue_connections: Sequence[str], fake_queue_registry: JobRegistry | None
) -> Iterator[FakeQueueManager]:
    """A `QueueManager.fake()`: it records what the code under test dispatches."""
    manager = QueueManager.fake(connections=fake_queue_connections, registry=fake_queue_registry)
    yield manager
    manager.blocking().close()


__all__ = ["fake_queue_connections", "fake_queue_manager", "fake_queue_registry"]
