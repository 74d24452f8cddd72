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

from rainier_queue.cache import Cache
from rainier_queue.cache.stores import open_cache


@dataclass(frozen=True)
class Store:
    name: str
    url: Callable[[Path, str], str]
    check: Callable[[], None] | None = None
    cleanup: Callable[[Path, str], Coroutine[Any, Any, None]] | None = None
    opener: Callable[[str], Cache] | None = None
    """How to open the store from its URL, for one `open_cache` has no scheme for (a
    driver's own store, such as NATS's key-value bucket, that is no lock store a user names)."""


def _discover() -> dict[str, Store]:
    found: dict[str, Store] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name.startswith("store_"):
            store: Store = importlib.import_module(f"{__package__}.{info.name}").STORE
            found[store.name] = store
    return found


STORES: dict[str, Store] = _discover()


def open_store(url: str) -> Cache:
    """The store at `url`: by its store's own opener if it has one, else by `open_cache`."""
    for store in STORES.values():
        if store.opener is not None and url.startswith(f"{store.name}://"):
            return store.opener(url)
    return open_cache(url)
