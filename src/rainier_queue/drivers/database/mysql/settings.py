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
from typing import ClassVar, Self, TypedDict

from ...options import DriverSettings, Options
from ..schema import DEFAULT_PREFIX, check_prefix
from .address import TLS_OPTIONS, ClientTLS, ServerAddress

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
class MySQLSettings(DriverSettings):
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
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Every option in the query: aiomysql reads none of it."""
        return ServerAddress.from_url(url, what=who)[1]

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        address, _ = ServerAddress.from_url(url, what=options.where)
        return cls(
            url=url.split("?", 1)[0],
            address=address,
            prefix=options.prefix("prefix", DEFAULT_PREFIX, check_prefix),
            pool_min=options.count("pool_min", 1),
            pool_max=options.count("pool_max", DEFAULT_POOL_MAX),
            connect_timeout=options.duration("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
            tls=ClientTLS.from_options(options, where=address.describe()),
        )

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
