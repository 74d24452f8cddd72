# SPDX-License-Identifier: MIT
"""How the contract suite opens each driver: a URL per namespace, and options.

Each driver adds itself in a module of its own beside this one,
`backend_<driver>.py`, defining `BACKEND = Backend(...)`; every contract
test then runs on it, each in a namespace of its own (a fresh file, a key
prefix, a table prefix), so tests never see each other's jobs. The URL
must carry the namespace, so that `open_queue(url)` alone, in another
process, reaches the same one.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from rainier_queue.connections import open_queue
from rainier_queue.drivers import DriverContext
from rainier_queue.queue import Queue


@dataclass(frozen=True)
class Backend:
    """One driver as the suite sees it."""

    name: str
    url: Callable[[Path, str], str]
    """The URL for a namespace, given a per-test temp dir and a unique name."""
    options: dict[str, Any] = field(default_factory=dict)
    check: Callable[[], None] | None = None
    """Skip or fail (see `tests.conftest.unreachable`) when the service is missing."""
    cleanup: Callable[[Path, str], Coroutine[Any, Any, None]] | None = None
    """Remove what a test's namespace left on the server (tables, keys)."""

    def open(
        self, tmp: Path, namespace: str, *, lease: timedelta | None = None, **extra: Any
    ) -> Queue:
        options = {**self.options, **extra}
        if lease is not None:
            options["lease"] = f"{lease.total_seconds()}s"
        return open_queue(self.url(tmp, namespace), options, DriverContext())


def _discover() -> dict[str, Backend]:
    found: dict[str, Backend] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name.startswith("backend_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            backend: Backend = module.BACKEND
            found[backend.name] = backend
    return found


BACKENDS: dict[str, Backend] = _discover()
