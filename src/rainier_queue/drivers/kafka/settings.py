# SPDX-License-Identifier: MIT
"""Reading a `kafka://` URL and its options into settings, before anything connects.

    kafka://broker-1:9092,broker-2:9092/?locks=redis://cache:6379/0&group=checkout

The host list is the bootstrap servers (port 9092 when left out). The lock
store is named by its own URL in the `locks` option, because the queue
cannot work without one: partition leases, cursors and delivery counts all
live there. In a config file the same settings are keys of the connection's
table, which win over the URL's query; an unknown key is refused with a
"did you mean" either way.

A user and password in the URL are the SASL credentials (`sasl_mechanism`
PLAIN by default, or SCRAM-SHA-256/512); `tls=true` encrypts the connection.
None of it is ever printed: `describe` shows the URL with the password and
the whole query (which holds the lock store's URL) replaced by `***`.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from ...errors import ConfigurationError
from ...queue import DEFAULT_LEASE
from ...redact import redact_url
from ..options import DriverSettings, Options
from .names import check_prefix

OPTIONS = frozenset(
    {
        "locks",
        "group",
        "topic_prefix",
        "lease",
        "max_wait",
        "batch_bytes",
        "client_id",
        "tls",
        "sasl_mechanism",
        "partitions",
        "replication",
    }
)
"""Every option the `kafka` driver takes, in the URL's query or the connection's table."""

DEFAULT_GROUP = "rainier"
DEFAULT_MAX_WAIT = timedelta(milliseconds=100)
DEFAULT_BATCH_BYTES = 16384
DEFAULT_PARTITIONS = 1
"""Partitions of a topic `provision` creates unless told: Kafka's own default, and one job of
the queue at a time, in order. The count is the queue's concurrency; set `partitions`."""
MOST_REPLICAS = 3
"""Replicas of a topic `provision` creates unless told: this many, or every broker of a
smaller cluster (one on a laptop's single broker, three on a cluster of three or more)."""
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaSettings(DriverSettings):
    """Everything the driver needs to reach the brokers, and where its lock store is."""

    brokers: tuple[str, ...]
    group: str = DEFAULT_GROUP
    """Whose cursors these are: workers in one group share the jobs, groups each get all."""
    topic_prefix: str = ""
    lease: timedelta = DEFAULT_LEASE
    """How long a partition stays leased to a worker that stopped renewing it."""
    max_wait: timedelta = DEFAULT_MAX_WAIT
    """How long one reserve waits for the broker to answer a fetch."""
    batch_bytes: int = DEFAULT_BATCH_BYTES
    """The producer's batch size. 1 sends one record per batch (see the Tansu note in the docs)."""
    client_id: str = "rainier-queue"
    tls: bool = False
    sasl_mechanism: str | None = None
    partitions: int = DEFAULT_PARTITIONS
    """How many partitions each queue's topic should have: how many of its jobs run at once.
    `provision` creates topics with this many and grows a topic that has fewer."""
    replication: int | None = None
    """Replicas of each topic `provision` creates (None: `MOST_REPLICAS`, or every broker of
    a smaller cluster). Set, `doctor` also reports a topic with fewer replicas."""
    username: str | None = None
    password: str | None = None
    url: str = "kafka://localhost:9092"
    """As given, for `describe` (which redacts it)."""
    locks: str = ""
    """The lock store's URL (the queue opens it through its `DriverContext`)."""

    OPTIONS: ClassVar[frozenset[str]] = OPTIONS

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Every option in the query: aiokafka reads none of it."""
        parts = urlsplit(url)
        if parts.scheme.lower() != "kafka":
            raise ConfigurationError(
                f"the kafka driver takes a `kafka://` URL, not {redact_url(url)}"
            )
        return dict(parse_qsl(parts.query, keep_blank_values=True))

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        locks = options.text("locks", "")
        if not locks:
            raise ConfigurationError(
                "the kafka driver needs a shared lock store for its partition leases and "
                "cursors: add `locks` with the URL of a Redis or database store, for example "
                "`kafka://broker:9092/?locks=redis://cache:6379/0` (URL-encode it in a query "
                'string) or `locks = "postgresql://..."` in the connection\'s settings'
            )
        mechanism = options.get("sasl_mechanism")
        if mechanism is not None and str(mechanism).upper() not in _MECHANISMS:
            raise ConfigurationError(
                f"`sasl_mechanism` must be one of {', '.join(_MECHANISMS)}, not {mechanism!r}"
            )
        parts = urlsplit(url)
        return cls(
            brokers=parse_brokers(parts.netloc),
            group=options.text("group", DEFAULT_GROUP),
            topic_prefix=options.prefix("topic_prefix", "", check_prefix),
            lease=options.lease(DEFAULT_LEASE),
            max_wait=options.duration("max_wait", DEFAULT_MAX_WAIT),
            batch_bytes=options.count("batch_bytes", DEFAULT_BATCH_BYTES, minimum=1),
            client_id=options.text("client_id", "rainier-queue"),
            tls=options.flag("tls", False),
            sasl_mechanism=None if mechanism is None else str(mechanism).upper(),
            partitions=options.count("partitions", DEFAULT_PARTITIONS, minimum=1),
            replication=(
                None
                if options.get("replication") is None
                else options.count("replication", 1, minimum=1)
            ),
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            url=url,
            locks=locks,
        )

    def client_arguments(self) -> dict[str, Any]:
        """Keyword arguments aiokafka's producer and consumer both take."""
        args: dict[str, Any] = {
            "bootstrap_servers": list(self.brokers),
            "client_id": self.client_id,
        }
        if self.username is not None:
            args["security_protocol"] = "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
            args["sasl_mechanism"] = self.sasl_mechanism or "PLAIN"
            args["sasl_plain_username"] = self.username
            args["sasl_plain_password"] = self.password or ""
        elif self.tls:
            args["security_protocol"] = "SSL"
        if self.tls:
            args["ssl_context"] = ssl.create_default_context()
        return args

    def describe(self) -> str:
        return f"kafka {redact_url(self.url)} group={self.group!r} prefix={self.topic_prefix!r}"

    def __repr__(self) -> str:  # the password must not show, even in a debugger
        return f"KafkaSettings({self.describe()})"


def parse_brokers(netloc: str) -> tuple[str, ...]:
    """`host:port,host` as a tuple of `host:port`, port 9092 where none is given."""
    hosts = netloc.rsplit("@", 1)[-1]
    brokers: list[str] = []
    for seed in filter(None, (part.strip() for part in hosts.split(","))):
        host, colon, port = seed.rpartition(":")
        if not colon or "]" in port:
            host, port = seed, "9092"
        if not host or not port.isdigit():
            raise ConfigurationError(
                f"a kafka URL lists brokers as host:port,host:port; cannot read {seed!r}"
            )
        brokers.append(f"{host}:{port}")
    if not brokers:
        raise ConfigurationError("a kafka URL needs at least one broker: kafka://host:9092")
    return tuple(brokers)


def read_settings(url: str, options: Mapping[str, Any]) -> tuple[KafkaSettings, str]:
    """The settings, and the lock store's URL, from a `kafka://` URL and its options."""
    settings, _ = KafkaSettings.read(url, options, who="the `kafka` driver")
    return settings, settings.locks


__all__ = ["OPTIONS", "KafkaSettings", "parse_brokers", "read_settings"]
