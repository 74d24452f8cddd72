# SPDX-License-Identifier: MIT
"""`PostgresSettings`: one PostgreSQL connection's options, read one way for every part.

The queue and the cache and lock store on a server take the same options
(`prefix`, `schema`, the pool's size and patience, `prepared_statements`,
`insecure_skip_verify`) from a URL's query or a config table. Read in two
places, they drifted: the store took `pool_min=abc` to a bare `ValueError`
and a misspelt option to libpq, where the queue named the problem. Read
here, they cannot; each side adds only what is its own (`lease` and
`migrate` for the queue) through `extra`. Everything else in the query goes
to libpq, as `split_url` decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar, Self, TypedDict

from ...options import DriverSettings, Options
from ..schema import DEFAULT_PREFIX
from .connection import DEFAULT_POOL_TIMEOUT, PoolSettings, split_url


class PostgresKeywords(TypedDict):
    """What `PostgresQueue` and `PostgresCache` both take, by the same names."""

    prefix: str
    schema: str | None
    pool_min: int
    pool_max: int
    pool_timeout: timedelta
    prepared_statements: bool
    insecure_skip_verify: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresSettings(DriverSettings):
    """Where to connect (libpq's DSN), which tables, and how to pool connections."""

    dsn: str
    prefix: str = DEFAULT_PREFIX
    schema: str | None = None
    pool: PoolSettings = field(default_factory=PoolSettings)
    insecure_skip_verify: bool = False

    OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {
            "prefix",
            "schema",
            "pool_min",
            "pool_max",
            "pool_timeout",
            "prepared_statements",
            "insecure_skip_verify",
        }
    )

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Ours from the query; libpq checks the rest (`split_url`)."""
        return split_url(url, known)[1]

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        return cls(
            dsn=split_url(url, options.known)[0],
            prefix=options.get("prefix", DEFAULT_PREFIX),
            schema=options.get("schema") or None,
            pool=PoolSettings(
                min_size=options.count("pool_min", 1),
                max_size=options.count("pool_max", 10),
                timeout=options.duration("pool_timeout", DEFAULT_POOL_TIMEOUT),
                prepared_statements=options.flag("prepared_statements", True),
            ),
            insecure_skip_verify=options.flag("insecure_skip_verify", False),
        )

    def keywords(self) -> PostgresKeywords:
        """The constructor keywords the queue and its store share (both take these names)."""
        return {
            "prefix": self.prefix,
            "schema": self.schema,
            "pool_min": self.pool.min_size,
            "pool_max": self.pool.max_size,
            "pool_timeout": self.pool.timeout,
            "prepared_statements": self.pool.prepared_statements,
            "insecure_skip_verify": self.insecure_skip_verify,
        }


__all__ = ["PostgresKeywords", "PostgresSettings"]
