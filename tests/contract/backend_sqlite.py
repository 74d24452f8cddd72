# SPDX-License-Identifier: MIT
"""SQLite in the contract suite: one file per test, a table prefix per namespace.

Two namespaces in one test (the isolation promise) are two prefixes in one
file, which is how two applications would share a SQLite file.
"""

from __future__ import annotations

from .backends import Backend

EMBEDDED = "SQLite is embedded in the process: there is no server"

WAKE_ONLY = {"poll_interval": "60s"}
"""The poll a minute apart: a push from another process must be heard (nearby.py)."""

BACKEND = Backend(
    "sqlite",
    lambda tmp, ns: f"sqlite:///{tmp / 'queue.db'}?prefix={ns}_",
    backlog=(10_000, 2),  # one writer at a time: the foundation's 10,000 over 2
    wake_only=WAKE_ONLY,
    lacks={
        "secret_url": "a SQLite URL is a file path: it carries no credentials",
        "unreachable_url": (
            f"{EMBEDDED} to be unreachable (a file locked by another process is"
            " tests/drivers/test_sqlite_queue.py's)"
        ),
        "cut": f"{EMBEDDED} and no connection whose answer could be lost",
        "private_server": f"{EMBEDDED} to restart",
    },
)
