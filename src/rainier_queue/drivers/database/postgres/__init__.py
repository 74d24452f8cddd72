# SPDX-License-Identifier: MIT
"""The PostgreSQL backend: the production default.

One folder per database keeps everything PostgreSQL-particular in one
place: `connection` (the pool, URL and TLS rules, error translation; shared
with the PostgreSQL cache and lock store), `statements` (the one-statement
claims and settles), `push` (bulk enqueue by COPY), `listen` (LISTEN/NOTIFY
wake-ups), `health` (what `doctor` checks), `dialect` (how the shared
database queue's SQL runs here) and `queue` (the `Queue` port).
What choosing it costs is in `queue`'s module doc.
"""

from __future__ import annotations

from .dialect import PostgresDialect
from .queue import PostgresQueue, channel_for

__all__ = ["PostgresDialect", "PostgresQueue", "channel_for"]
