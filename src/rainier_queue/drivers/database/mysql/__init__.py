# SPDX-License-Identifier: MIT
"""The MySQL / MariaDB backend.

One folder per database keeps everything MySQL-particular in one place:
`connection` (the pool, URL and TLS rules, server checks, error
translation; shared with the MySQL cache and lock store), `push` (bulk
enqueue in one statement) and `queue` (the `Queue` port). What choosing it
costs is in `queue`'s module doc.
"""

from __future__ import annotations

from .queue import MySQLDialect, MySQLQueue

__all__ = ["MySQLDialect", "MySQLQueue"]
