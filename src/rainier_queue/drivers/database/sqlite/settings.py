# SPDX-License-Identifier: MIT
"""`SQLiteSettings`: one SQLite file's options, read one way for every part that opens it.

The queue and the cache and lock store on a file take the same options
(`prefix`, `busy_timeout`) from a URL's query or a config table. Read in two
places, they drifted: the store refused a misspelt option with a bare
`ValueError` while the queue suggested the right name. Read here, they
cannot; each side adds only what is its own (`lease` and `migrate` for the
queue) through `extra`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar, Self

from ...options import DriverSettings, Options
from ..schema import DEFAULT_PREFIX, check_prefix
from .connection import path_from_url


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLiteSettings(DriverSettings):
    """Which file, which table prefix, how long to wait for another writer."""

    path: str
    prefix: str = DEFAULT_PREFIX
    busy_timeout: timedelta | None = None
    """None: the opener's own default."""

    OPTIONS: ClassVar[frozenset[str]] = frozenset({"prefix", "busy_timeout"})

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Every option in the query: none of it is for sqlite3."""
        return path_from_url(url, what=who)[1]

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        return cls(
            path=path_from_url(url, what=options.where)[0],
            prefix=options.prefix("prefix", DEFAULT_PREFIX, check_prefix),
            busy_timeout=(
                options.duration("busy_timeout", timedelta(0))
                if "busy_timeout" in options
                else None
            ),
        )


__all__ = ["SQLiteSettings"]
