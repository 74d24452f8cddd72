# SPDX-License-Identifier: MIT
"""`RedisSettings`: one Redis connection's options, read one way for the queue and its store.

The queue and the cache and lock store on a Redis take the same options
(`prefix`, `cluster`) from a URL's query or a config table, and hand the
rest of the query to redis-py. Each used to split the URL itself, so the
two could read one option two ways; read here, they cannot. Each adds only
what is its own through `extra` (`lease`, `consumer`, `wait_replicas`,
`wait_timeout` for the queue) and builds its client from `client_url`,
which no longer holds any option of this library's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self

from ...redact import redact_url
from ..options import DriverSettings, Options
from .connection import Client, connect, split_options


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisSettings(DriverSettings):
    """Which Redis (or cluster), reached how, and the prefix of every key."""

    url: str = field(repr=False)
    """As given, for `describe` and `doctor` (redacted wherever it is shown)."""
    client_url: str = field(repr=False)
    """The URL redis-py reads: `url` without this library's options."""
    cluster: bool = False
    """A Redis Cluster: `redis-cluster://h:p,h:p`, or `cluster=true`."""
    prefix: str | None = None
    """None: the part's own default (`rq:` for the queue, `rq:cache:` for the store)."""
    ours: frozenset[str] = field(default=frozenset(), repr=False)
    """Every option of this library's the reader took, for redis-py's "did you mean"."""

    OPTIONS: ClassVar[frozenset[str]] = frozenset({"prefix", "cluster"})

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Ours from the query; redis-py checks the rest when the client is built."""
        return split_options(url, known)[1]

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        cluster = options.flag("cluster", False) or url.lower().startswith("redis-cluster:")
        given = options.get("prefix")
        return cls(
            url=url,
            client_url=split_options(url, options.known)[0],
            cluster=cluster,
            prefix=None if given is None else str(given),
            ours=options.known,
        )

    def client(self, *, decode: bool) -> Client:
        """A redis-py client for these settings; it connects lazily, on its first command."""
        return connect(self.client_url, cluster=self.cluster, decode=decode, ours=self.ours)

    def __repr__(self) -> str:  # the password must not show, even in a debugger
        return f"RedisSettings({redact_url(self.url)}, prefix={self.prefix!r})"


__all__ = ["RedisSettings"]
