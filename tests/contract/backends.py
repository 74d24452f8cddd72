# SPDX-License-Identifier: MIT
"""How the contract suite opens each driver: a URL per namespace, and options.

Adding a driver to the suite is one entry here. Every contract test then
runs on it, each in a namespace of its own (a fresh file, a key prefix, a
topic prefix), so tests never see each other's jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from rainier_queue.drivers import DriverContext, open_queue
from rainier_queue.queue import Queue


@dataclass(frozen=True)
class Backend:
    """One driver as the suite sees it."""

    name: str
    url: Callable[[Path, str], str]
    """The URL for a namespace, given a per-test temp dir and a unique name."""
    options: dict[str, Any] = field(default_factory=dict)

    def open(
        self, tmp: Path, namespace: str, *, lease: timedelta | None = None, **extra: Any
    ) -> Queue:
        options = {**self.options, **extra}
        if lease is not None:
            options["lease"] = f"{lease.total_seconds()}s"
        return open_queue(self.url(tmp, namespace), options, DriverContext())


BACKENDS: dict[str, Backend] = {
    "memory": Backend("memory", lambda tmp, ns: "memory://"),
    "sqlite": Backend("sqlite", lambda tmp, ns: f"sqlite:///{tmp / ns}.db"),
}
