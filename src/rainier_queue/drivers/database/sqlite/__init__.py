# SPDX-License-Identifier: MIT
"""The SQLite backend: the database queue in one local file, the embedded default.

One folder per database keeps everything SQLite-particular in one place:
`connection` (the file, its thread, its errors; shared with the SQLite
cache and lock store) and `queue` (the `Queue` port on the shared
`DatabaseQueue` seam). What choosing it costs is in `queue`'s module doc:
one writer at a time, one machine, polling across processes.
"""

from __future__ import annotations

from .queue import DEFAULT_BUSY_TIMEOUT, SQLiteDialect, SQLiteQueue

__all__ = ["DEFAULT_BUSY_TIMEOUT", "SQLiteDialect", "SQLiteQueue"]
