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
from typing import Any, ClassVar, Self, TypedDict

from ....durations import parse_duration
from ....errors import ConfigurationError
from ....flags import parse_flag
from ..._options import merge_options
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
class PostgresSettings:
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
    def read(
        cls,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        who: str,
        extra: frozenset[str] = frozenset(),
    ) -> tuple[Self, dict[str, Any]]:
        """The settings from `url` and `options` (which win), and the `extra` options given."""
        known = cls.OPTIONS | extra
        dsn, query = split_url(url, known)
        merged = merge_options(query, options or {}, known, who)
        timeout = merged.get("pool_timeout")
        settings = cls(
            dsn=dsn,
            prefix=merged.get("prefix", DEFAULT_PREFIX),
            schema=merged.get("schema") or None,
            pool=PoolSettings(
                min_size=whole_number(merged.get("pool_min", 1), setting="pool_min"),
                max_size=whole_number(merged.get("pool_max", 10), setting="pool_max"),
                timeout=(
                    DEFAULT_POOL_TIMEOUT
                    if timeout is None
                    else parse_duration(timeout, setting="pool_timeout")
                ),
                prepared_statements=parse_flag(
                    merged.get("prepared_statements", True), setting="prepared_statements"
                ),
            ),
            insecure_skip_verify=parse_flag(
                merged.get("insecure_skip_verify", False), setting="insecure_skip_verify"
            ),
        )
        return settings, {key: value for key, value in merged.items() if key in extra}

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


def whole_number(value: object, *, setting: str) -> int:
    """A whole-number option from a URL's query or a config table."""
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(str(value))
    except ValueError:
        raise ConfigurationError(f"`{setting}` must be a whole number, not {value!r}") from None


__all__ = ["PostgresKeywords", "PostgresSettings", "whole_number"]
