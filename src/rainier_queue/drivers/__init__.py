# SPDX-License-Identifier: MIT
"""The drivers, found by URL scheme and imported only when asked for.

A base install must not import redis-py or psycopg just to run on SQLite,
and a missing client library must be a clear error naming the `pip install`
that fixes it, never a silent fallback to another driver. So each scheme
maps to a module path and the extra that provides its client, and the
module is imported when a connection is built.

Every driver class offers the same constructor from configuration:

```python
@classmethod
def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self
```

and lists the options it takes in `OPTIONS`, so an unknown one is refused
with a "did you mean" before anything connects.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast
from urllib.parse import parse_qsl

from ..context import Dependencies
from ..errors import ConfigurationError, MissingDependency, SpelledOtherwise, UnknownOption
from ..locks import Cache
from ..queue import Capabilities, Queue
from ..registry import JobRegistry
from ..schemes import scheme_of
from .upstream_names import explain


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverContext:
    """What a driver may need from the application besides its own settings."""

    registry: JobRegistry = field(default_factory=JobRegistry)
    """For `InlineQueue`, which runs jobs itself."""
    dependencies: Dependencies = field(default_factory=Dependencies)
    open_cache: Callable[[str], Cache] | None = None
    """Opens a lock store from its URL, for a driver that keeps leases in one (Kafka).

    The connection layer (`rainier_queue.connections.open_queue`) hands it
    in, so a driver depends on the `Cache` port and never on the registry of
    stores above it, some of which reuse a database driver's code.
    """


class QueueFactory(Protocol):
    """What `open_queue` needs from a driver class."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    idle_wait: ClassVar[str]
    OPTIONS: ClassVar[frozenset[str]]

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Queue:
        """Build the queue from a URL and its options (already checked against OPTIONS)."""
        ...


@dataclass(frozen=True, slots=True)
class _Entry:
    module: str
    attr: str
    extra: str | None
    client: str | None


_SCHEMES: dict[str, _Entry] = {
    "memory": _Entry("rainier_queue.drivers.memory", "MemoryQueue", None, None),
    "sync": _Entry("rainier_queue.drivers.inline", "InlineQueue", None, None),
    "inline": _Entry("rainier_queue.drivers.inline", "InlineQueue", None, None),
    "sqlite": _Entry("rainier_queue.drivers.database.sqlite", "SQLiteQueue", None, None),
    "postgresql": _Entry(
        "rainier_queue.drivers.database.postgres", "PostgresQueue", "postgres", "psycopg"
    ),
    "postgres": _Entry(
        "rainier_queue.drivers.database.postgres", "PostgresQueue", "postgres", "psycopg"
    ),
    "mysql": _Entry("rainier_queue.drivers.database.mysql", "MySQLQueue", "mysql", "aiomysql"),
    "mariadb": _Entry("rainier_queue.drivers.database.mysql", "MySQLQueue", "mysql", "aiomysql"),
    "redis": _Entry("rainier_queue.drivers.redis", "RedisQueue", "redis", "redis"),
    "rediss": _Entry("rainier_queue.drivers.redis", "RedisQueue", "redis", "redis"),
    "redis-cluster": _Entry("rainier_queue.drivers.redis", "RedisQueue", "redis", "redis"),
    # redis-py's URL for a Redis listening on a Unix socket: unix:///path/to/redis.sock
    "unix": _Entry("rainier_queue.drivers.redis", "RedisQueue", "redis", "redis"),
    "kafka": _Entry("rainier_queue.drivers.kafka", "KafkaQueue", "kafka", "aiokafka"),
    "sqs": _Entry("rainier_queue.drivers.sqs", "SQSQueue", "sqs", "aiobotocore"),
    "amqp": _Entry("rainier_queue.drivers.rabbitmq", "RabbitMQQueue", "rabbitmq", "aio_pika"),
    "amqps": _Entry("rainier_queue.drivers.rabbitmq", "RabbitMQQueue", "rabbitmq", "aio_pika"),
    "nats": _Entry("rainier_queue.drivers.nats", "NATSQueue", "nats", "nats"),
}

_SPELLED_OTHERWISE = {
    "tls": (
        "`tls://` is how NATS clients write a NATS server reached over TLS, but here a URL's "
        "scheme chooses the driver, and `tls` names no server; write "
        "`nats://host:4222/?tls=true` (with `tls_ca=/path/ca.pem` if your own authority signed "
        "the server's certificate)"
    ),
}
"""Schemes of other tools that no driver takes, and how to write what they mean here."""

COMMON_OPTIONS = frozenset({"url", "driver"})
"""Keys every connection declaration may carry besides its driver's own."""


def known_schemes() -> list[str]:
    """Every URL scheme a driver of this version answers to (planned ones left out)."""
    return sorted(_built())


def _built() -> dict[str, _Entry]:
    """The schemes whose driver module ships in this version.

    A driver still to come has its scheme reserved here before it lands, so
    its URLs get "not built yet" rather than a "did you mean" towards another
    driver; they are never offered as choices.
    """
    return {
        name: entry
        for name, entry in _SCHEMES.items()
        if importlib.util.find_spec(entry.module) is not None
    }


def driver_class(scheme: str) -> QueueFactory:
    """The driver class for `scheme`, imported now."""
    entry = _SCHEMES.get(scheme)
    if entry is None and scheme in _SPELLED_OTHERWISE:
        raise ConfigurationError(_SPELLED_OTHERWISE[scheme])
    if entry is None:
        raise UnknownOption("the queue URL", scheme, _built()) from None
    if importlib.util.find_spec(entry.module) is None:
        # Checked before the client: no `pip install` brings a driver this version lacks.
        raise ConfigurationError(_not_available(scheme))
    if entry.client and entry.extra and importlib.util.find_spec(entry.client) is None:
        raise MissingDependency(scheme, entry.extra)
    module = importlib.import_module(entry.module)
    return cast(QueueFactory, getattr(module, entry.attr))


def check_driver_name(driver: str, url: str, *, where: str) -> None:
    """Refuse a `driver` key that names another driver than the URL's scheme does.

    The URL's scheme decides the driver; the key is accepted so a config can
    say it out loud, and a disagreement is a mistake worth stopping for.
    """
    if driver not in _SCHEMES:
        raise UnknownOption(f"{where}: `driver`", driver, _built())
    scheme = scheme_of(url)
    chosen, named = _SCHEMES.get(scheme), _SCHEMES[driver]
    if chosen is None or (chosen.module, chosen.attr) != (named.module, named.attr):
        raise ConfigurationError(
            f"{where}: `driver = {driver!r}` disagrees with the URL, whose scheme `{scheme}` "
            "chooses the driver; drop `driver`, or fix one of the two"
        )


_PLANNED: dict[str, str] = {}


def _not_available(scheme: str) -> str:
    extra = _SCHEMES[scheme].extra or scheme
    return (
        f"`{scheme}://` is for the {_PLANNED.get(extra, extra)} driver, which is planned and "
        "not built yet: no version of rainier-queue has it so far, so no install brings it. "
        f"The schemes this version has are: {', '.join(known_schemes())}"
    )


def open_queue(
    url: str, options: Mapping[str, Any] | None = None, context: DriverContext | None = None
) -> Queue:
    """Build a queue from a URL such as `sqlite:///jobs.db` plus driver options."""
    opts = dict(options or {})
    scheme = scheme_of(url)
    cls = driver_class(scheme)
    where = f"the `{scheme}` driver"
    for key in opts:
        if key not in cls.OPTIONS:
            raise _refusal(where, key, cls)
    for key in _query_keys(url):
        # The upstream's names, wherever they are written; any other key in the
        # query is the driver's (or its client's) to read or refuse.
        if key not in cls.OPTIONS and explain(key, cls) is not None:
            raise _refusal(f"{where} (in the URL's query)", key, cls)
    return cls.from_config(url, opts, context or DriverContext())


def _refusal(where: str, key: str, cls: QueueFactory) -> UnknownOption:
    """`SpelledOtherwise` for one of the upstream's names, else `UnknownOption`."""
    explanation = explain(key, cls)
    if explanation is not None:
        return SpelledOtherwise(where, key, explanation)
    return UnknownOption(where, key, cls.OPTIONS)


def _query_keys(url: str) -> list[str]:
    query = url.partition("?")[2].partition("#")[0]
    return [key for key, _ in parse_qsl(query, keep_blank_values=True)]


__all__ = [
    "COMMON_OPTIONS",
    "check_driver_name",
    "DriverContext",
    "driver_class",
    "known_schemes",
    "open_queue",
    "scheme_of",
]
