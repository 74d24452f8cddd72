# SPDX-License-Identifier: MIT
"""`MySQLSettings`: one MySQL/MariaDB server's options, read one way for every part.

The queue and the cache and lock store on a server take the same options
(`prefix`, the pool's size, `connect_timeout`, TLS) from a URL's query or a
config table. Read in two places, they drifted: the store refused a
misspelt option with a bare `ValueError` and had defaults of its own. Read
here, they cannot; each side adds only what is its own (`lease` and
`migrate` for the queue) through `extra`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Self, TypedDict

from ....durations import parse_duration
from ..._options import merge_options
from ..schema import DEFAULT_PREFIX, check_prefix
from .connection import TLS_OPTIONS, ClientTLS, ServerAddress, int_option

DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=10)
DEFAULT_POOL_MAX = 10


class MySQLKeywords(TypedDict):
    """What `MySQLQueue` and `MySQLCache` both take, by the same names."""

    prefix: str
    pool_min: int
    pool_max: int
    connect_timeout: timedelta
    tls: ClientTLS | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MySQLSettings:
    """Where the server is and who logs in, which tables, the pool, and TLS."""

    url: str
    """The URL without its query: host, port, user, password, database."""
    address: ServerAddress
    prefix: str = DEFAULT_PREFIX
    pool_min: int = 1
    pool_max: int = DEFAULT_POOL_MAX
    connect_timeout: timedelta = DEFAULT_CONNECT_TIMEOUT
    tls: ClientTLS | None = None

    OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"prefix", "pool_min", "pool_max", "connect_timeout", *TLS_OPTIONS}
    )

    @classmethod
    def read(
        cls,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        who: str,
        extra: frozenset[str] = frozenset(),
    ) -> tuple[Self, dict[str, Any]]:
        """The settings from `url` and `options` (which win), and the `extra` options given."""
        address, query = ServerAddress.from_url(url, what=who)
        merged = merge_options(query, options or {}, cls.OPTIONS | extra, who)
        timeout = merged.get("connect_timeout")
        settings = cls(
            url=url.split("?", 1)[0],
            address=address,
            prefix=check_prefix(merged.get("prefix", DEFAULT_PREFIX)),
            pool_min=int_option(merged.get("pool_min", 1), setting="pool_min"),
            pool_max=int_option(merged.get("pool_max", DEFAULT_POOL_MAX), setting="pool_max"),
            connect_timeout=(
                DEFAULT_CONNECT_TIMEOUT
                if timeout is None
                else parse_duration(timeout, setting="connect_timeout")
            ),
            tls=ClientTLS.from_options(merged, where=address.describe()),
        )
        return settings, {key: value for key, value in merged.items() if key in extra}

    def keywords(self) -> MySQLKeywords:
        """The constructor keywords the queue and its store share (both take these names)."""
        return {
            "prefix": self.prefix,
            "pool_min": self.pool_min,
            "pool_max": self.pool_max,
            "connect_timeout": self.connect_timeout,
            "tls": self.tls,
        }


__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_POOL_MAX", "MySQLKeywords", "MySQLSettings"]
