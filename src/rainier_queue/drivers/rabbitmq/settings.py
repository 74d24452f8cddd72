# SPDX-License-Identifier: MIT
"""Reading an `amqp://` URL and its options into settings, before anything connects.

    amqp://user:password@host:5672/vhost?prefix=app.&delays=1s,30s,10m

The URL is RabbitMQ's own (`amqps://` for TLS); the path is the virtual
host (`/` when left out, `%2F` spelled out). Every option in the query is
this library's, since aio-pika is handed host, port, credentials and vhost
alone, so a misspelt one is refused here with a "did you mean". In a config
file the same options are keys of the connection's table, which win.

`locks` names a shared lock store (its URL, URL-encoded in a query) that
batches are counted in, since a queue has no store of its own to count them
in (`drivers/lock_store_batches.py`); without it a batch is refused.

The user and password never show: `describe` and `repr` redact the URL.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from ...durations import parse_duration
from ...errors import ConfigurationError
from ...redact import redact_url
from ..options import DriverSettings, Options
from ..tls import insecure

OPTIONS = frozenset(
    {
        "prefix",
        "delays",
        "delivery_limit",
        "confirm_timeout",
        "lease",
        "ssl_ca_certs",
        "insecure_skip_verify",
        "locks",
        "queue_type",
    }
)
"""Every option the `rabbitmq` driver takes, in the URL's query or the connection's table."""

DEFAULT_PREFIX = "rq."
DEFAULT_DELAYS = (
    timedelta(seconds=1),
    timedelta(seconds=5),
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(hours=1),
)
"""The delay tiers `provision` declares per queue unless told (see topology.py)."""
DEFAULT_DELIVERY_LIMIT = 20
"""`x-delivery-limit` of a work queue: a job delivered this many times more than once
without being settled is dead-lettered to the failed queue by the broker itself."""
DEFAULT_CONFIRM_TIMEOUT = timedelta(seconds=30)
QUEUE_TYPES = ("quorum", "classic")
"""`queue_type`: quorum queues (the default), or classic ones, which lose what quorum queues
keep (see `CLASSIC_COSTS` in topology.py and the driver's page)."""
CONSUMER_TIMEOUT = timedelta(minutes=30)
"""RabbitMQ's default `consumer_timeout`: the longest a delivery may go unacknowledged."""


def check_prefix(given: object) -> str:
    """A prefix is the start of every queue name, so it must be short and never `amq.`."""
    prefix = str(given)
    if not re.fullmatch(r"[A-Za-z0-9_.:-]*", prefix):
        raise ConfigurationError(
            f"the RabbitMQ `prefix` {prefix!r} may use only letters, digits, `.`, `:`, `_` and `-`"
        )
    if prefix.startswith("amq."):
        raise ConfigurationError(
            f"the RabbitMQ `prefix` {prefix!r} starts with `amq.`, which RabbitMQ keeps for "
            "itself; choose another, such as `rq.`"
        )
    if len(prefix.encode()) > 64:
        raise ConfigurationError(
            f"the RabbitMQ `prefix` {prefix!r} is longer than 64 bytes; queue names are at "
            "most 255, and the prefix is only their start"
        )
    return prefix


def read_queue_type(value: object) -> str:
    """`quorum` or `classic`, said on purpose: nothing else is read as either."""
    kind = str(value).strip().lower()
    if kind not in QUEUE_TYPES:
        raise ConfigurationError(
            f"the RabbitMQ `queue_type` {value!r} is not one of {', '.join(QUEUE_TYPES)}; leave "
            "it out for quorum queues, or say `classic` for classic ones (which lose what "
            "quorum queues keep: see the driver's page)"
        )
    return kind


def read_delays(value: object) -> tuple[timedelta, ...]:
    """`1s,30s,10m` (or a list) as sorted, distinct tiers, each longer than zero."""
    parts: list[Any] = (
        list(value) if isinstance(value, list | tuple) else str(value).replace(" ", "").split(",")
    )
    tiers = sorted({parse_duration(part, setting="delays") for part in parts if part != ""})
    if not tiers or tiers[0] <= timedelta(0):
        raise ConfigurationError(
            f"`delays` must list one or more delay tiers longer than zero, such as "
            f"`1s,30s,10m`, not {value!r}"
        )
    return tuple(tiers)


@dataclass(frozen=True, slots=True, kw_only=True)
class RabbitMQSettings(DriverSettings):
    """Which broker and vhost, reached how, and the shape of the queues `provision` makes."""

    url: str = field(repr=False)
    host: str = "localhost"
    port: int = 5672
    vhost: str = "/"
    username: str = field(default="guest", repr=False)
    password: str = field(default="guest", repr=False)
    tls: bool = False
    ca_file: str | None = None
    verify: bool = True
    prefix: str = DEFAULT_PREFIX
    delays: tuple[timedelta, ...] = DEFAULT_DELAYS
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT
    confirm_timeout: timedelta = DEFAULT_CONFIRM_TIMEOUT
    lease: timedelta = CONSUMER_TIMEOUT
    """The server's `consumer_timeout`: a job must be settled within it (see queue.py)."""
    queue_type: str = "quorum"
    """What `provision` declares: `quorum`, or `classic` (lossy, asked for by name)."""
    locks: str = field(default="", repr=False)
    """The URL of the lock store batches are counted in (`drivers/lock_store_batches.py`);
    empty: none, and a batch is refused."""

    OPTIONS: ClassVar[frozenset[str]] = OPTIONS

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Every option in the query: aio-pika is given none of it."""
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("amqp", "amqps"):
            raise ConfigurationError(
                f"the rabbitmq driver takes an `amqp://` or `amqps://` URL, not {redact_url(url)}"
            )
        return dict(parse_qsl(parts.query, keep_blank_values=True))

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        parts = urlsplit(url)
        tls = parts.scheme.lower() == "amqps"
        skip = insecure(options.get("insecure_skip_verify", False), where="the rabbitmq driver")
        ca_file = options.get("ssl_ca_certs")
        if (skip or ca_file) and not tls:
            raise ConfigurationError(
                "`ssl_ca_certs` and `insecure_skip_verify` are for TLS: use an `amqps://` URL"
            )
        try:
            port = parts.port or (5671 if tls else 5672)
        except ValueError:
            raise ConfigurationError(f"cannot read the port of {redact_url(url)}") from None
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        limit = options.count("delivery_limit", DEFAULT_DELIVERY_LIMIT, minimum=1)
        return cls(
            url=url,
            host=parts.hostname or "localhost",
            port=port,
            vhost=unquote(path) or "/",
            username=unquote(parts.username) if parts.username else "guest",
            password=unquote(parts.password) if parts.password else "guest",
            tls=tls,
            ca_file=None if not ca_file else str(ca_file),
            verify=not skip,
            prefix=options.prefix("prefix", DEFAULT_PREFIX, check_prefix),
            delays=(
                DEFAULT_DELAYS if options.get("delays") is None else read_delays(options["delays"])
            ),
            delivery_limit=limit,
            confirm_timeout=options.positive_duration("confirm_timeout", DEFAULT_CONFIRM_TIMEOUT),
            lease=options.lease(CONSUMER_TIMEOUT),
            locks=options.text("locks", ""),
            queue_type=read_queue_type(options.get("queue_type") or "quorum"),
        )

    @property
    def classic(self) -> bool:
        """Whether this connection's queues are classic ones (`queue_type=classic`)."""
        return self.queue_type == "classic"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for `amqps://`: the system's authorities, or `ssl_ca_certs`."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def describe(self) -> str:
        kind = " queue_type='classic'" if self.classic else ""
        return f"rabbitmq {redact_url(self.url)} prefix={self.prefix!r}{kind}"

    def __repr__(self) -> str:  # the password must not show, even in a debugger
        return f"RabbitMQSettings({self.describe()})"


__all__ = [
    "CONSUMER_TIMEOUT",
    "DEFAULT_DELAYS",
    "DEFAULT_DELIVERY_LIMIT",
    "OPTIONS",
    "QUEUE_TYPES",
    "RabbitMQSettings",
    "read_delays",
]
