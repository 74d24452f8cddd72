# SPDX-License-Identifier: MIT
"""SQLite in the contract suite: one file per test, a table prefix per namespace.

Two namespaces in one test (the isolation promise) are two prefixes in one
file, which is how two applications would share a SQLite file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..app_transactions import sqlite_transaction
from ..foreign.catalog import NUL_BAD_ROWS, SQLITE_BAD_ROWS, SQLITE_GOOD_VARIANTS
from ..foreign.planting import sql_rows
from .backends import Backend
from .raw_storage import sqlite_raw

EMBEDDED = "SQLite is embedded in the process: there is no server"

WAKE_ONLY = {"poll_interval": "60s"}
"""The poll a minute apart: a push from another process must be heard (nearby.py)."""


def _insert(tmp: Path, namespace: str, rows: list[dict[str, object]]) -> None:
    """Rows into the namespace's jobs table with Python's sqlite3, as another program would."""
    with sqlite3.connect(tmp / "queue.db") as conn:
        for row in rows:
            # A ("not-utf8", bytes) value is stored as TEXT holding those bytes.
            marks = ", ".join(
                "CAST(? AS TEXT)" if isinstance(v, tuple) else "?" for v in row.values()
            )
            values = [v[1] if isinstance(v, tuple) else v for v in row.values()]
            conn.execute(
                f"INSERT INTO {namespace}_jobs ({', '.join(row)}) VALUES ({marks})", values
            )


PLANT = sql_rows(
    _insert,
    # What only SQLite's loose typing lets in: text where numbers go, bytes that are not UTF-8,
    # a NUL in text (PostgreSQL refuses it on insert), and text times on well-formed jobs.
    bad={**SQLITE_BAD_ROWS, **NUL_BAD_ROWS},
    lenient=list(SQLITE_GOOD_VARIANTS.values()),
)

BACKEND = Backend(
    "sqlite",
    lambda tmp, ns: f"sqlite:///{tmp / 'queue.db'}?prefix={ns}_",
    transaction=lambda tmp: sqlite_transaction(tmp / "queue.db"),
    backlog=(10_000, 2),  # one writer at a time: the foundation's 10,000 over 2
    wake_only=WAKE_ONLY,
    plant=PLANT,
    raw=sqlite_raw,
    lacks={
        "secret_url": "a SQLite URL is a file path: it carries no credentials",
        "unreachable_url": (
            f"{EMBEDDED} to be unreachable (a file locked by another process is"
            " tests/drivers/test_sqlite_queue.py's)"
        ),
        "cut": f"{EMBEDDED} and no connection whose answer could be lost",
        "private_server": f"{EMBEDDED} to restart",
        "tls": f"{EMBEDDED}: nothing travels over a network to encrypt",
    },
)
