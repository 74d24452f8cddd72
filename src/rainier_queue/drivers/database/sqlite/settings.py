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
from typing import Any, ClassVar, Self

from ....durations import parse_duration
from ..._options import merge_options
from ..schema import DEFAULT_PREFIX, check_prefix
from .connection import path_from_url


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLiteSettings:
    """Which file, which table prefix, how long to wait for another writer."""

    path: str
    prefix: str = DEFAULT_PREFIX
    busy_timeout: timedelta | None = None
    """None: the opener's own default."""

    OPTIONS: ClassVar[frozenset[str]] = frozenset({"prefix", "busy_timeout"})

    @classmethod
    def read(
        cls,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        who: str,
        extra: frozenset[str] = frozenset(),
    ) -> tuple[Self, dict[str, Any]]:
        """The settings from `url` and `options` (which win), and the `extra` options given.

        An option that is neither this file's nor in `extra` is `UnknownOption`.
        """
        path, query = path_from_url(url, what=who)
        merged = merge_options(query, options or {}, cls.OPTIONS | extra, who)
        busy = merged.get("busy_timeout")
        settings = cls(
            path=path,
            prefix=check_prefix(merged.get("prefix", DEFAULT_PREFIX)),
            busy_timeout=None if busy is None else parse_duration(busy, setting="busy_timeout"),
        )
        return settings, {key: value for key, value in merged.items() if key in extra}


__all__ = ["SQLiteSettings"]
