# SPDX-License-Identifier: MIT
"""The stores behind the `Cache` port: memory, SQLite, PostgreSQL, MySQL and Redis.

The port itself (`Cache`, `Lock`, `LockManager`) lives in `rainier_queue.locks`,
below the drivers, so a driver that needs a lock store (Kafka's partition
leases) depends on the port and never on this package. The stores here sit
above the drivers instead: each opens its server through that database's
own `connection` and `settings` modules, so a store and its queue connect,
translate errors and read options one way. `stores.open_cache` picks one
from a URL.

The port's names are still importable from here.
"""

from __future__ import annotations

from ..locks import Cache, Lock, LockManager, parse_counter

__all__ = ["Cache", "Lock", "LockManager", "parse_counter"]
