# SPDX-License-Identifier: MIT
"""The cache stores the cache and lock contract runs on.

Each store adds itself in a module beside this one, `store_<name>.py`,
defining `STORE = Store(...)`. The URL carries the namespace (a key or
table prefix), so two stores opened on one URL share keys, as two
processes would.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Store:
    name: str
    url: Callable[[Path, str], str]
    check: Callable[[], None] | None = None
    cleanup: Callable[[Path, str], Coroutine[Any, Any, None]] | None = None


def _discover() -> dict[str, Store]:
    found: dict[str, Store] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name.startswith("store_"):
            store: Store = importlib.import_module(f"{__package__}.{info.name}").STORE
            found[store.name] = store
    return found


STORES: dict[str, Store] = _discover()
