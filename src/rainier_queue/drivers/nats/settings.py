# SPDX-License-Identifier: MIT
"""`NATSSettings`: one NATS connection's options, read once from its URL and table.

    nats://user:password@host:4222,host2:4222/?prefix=app&lease=60s
    nats://host:4222/?tls=true&tls_ca=/etc/ssl/nats-ca.pem

nats-py reads no query of its own, so every key in the query is this
library's, and one it does not take is refused with a "did you mean".
Credentials come four ways, as the server takes them: a user and password
in the URL, a token as the URL's user alone (`nats://s3cret@host`), an NKey
seed file (`nkey=/path/seed.nk`) or a credentials file (`creds=/path/app.creds`).
None of it is ever shown: `describe` replaces the password, a token and both
file paths with `***`.

What provisioning makes from these (the stream's storage and replicas, the
consumers' ack wait and delivery limit, the duplicate window) is checked by
`doctor` against what the server has; see provisioning.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from ...errors import ConfigurationError
from ...queue import DEFAULT_LEASE
from ...redact import redact_url
from .. import tls
from ..options import DriverSettings, Options

OPTIONS = frozenset(
    {
        "prefix",
        "storage",
        "replicas",
        "lease",
        "duplicate_window",
        "max_deliver",
        "sweep_every",
        "publish_timeout",
        "nkey",
        "creds",
        "tls",
        "tls_ca",
        tls.INSECURE,
    }
)
"""Every option the `nats` driver takes, in the URL's query or the connection's table."""

DEFAULT_PREFIX = "rq"
DEFAULT_DUPLICATE_WINDOW = timedelta(minutes=2)
"""The server's own default: a push repeated within it (same job id) is stored once."""
DEFAULT_MAX_DELIVER = 100
"""Deliveries after which the server stops handing a message out (the consumer's
`max_deliver`). It must exceed the largest `tries` of the queue's jobs: the worker fails a
job on the delivery after its last try, and this is the net under that."""
DEFAULT_SWEEP_EVERY = timedelta(seconds=30)
"""How often a worker looks for messages the server stopped delivering (max_deliver), in
case it missed the advisory that said so."""
DEFAULT_PUBLISH_TIMEOUT = timedelta(seconds=5)
"""How long a push waits for the server's publish acknowledgement before it is
`OutcomeUnknown`."""
STORAGES = ("file", "memory")

_PREFIX = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def check_prefix(value: object) -> str:
    """A prefix names the stream and begins every subject: letters, digits, `_` and `-`."""
    text = DEFAULT_PREFIX if value is None or value == "" else str(value)
    if not _PREFIX.match(text):
        raise ValueError(
            f"the nats `prefix` names a stream and begins every subject, so it takes 1 to 32 "
            f"letters, digits, `_` or `-`; {text!r} has something else"
        )
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class NATSSettings(DriverSettings):
    """Which servers, reached how, and the shape provisioning gives each queue."""

    servers: tuple[str, ...]
    """`nats://host:port` (`tls://host:port` when TLS is asked for, which is how nats-py names
    the servers it discovers) for each server of the URL, without credentials."""
    url: str = field(repr=False)
    prefix: str = DEFAULT_PREFIX
    storage: str = "file"
    """`file` (the default) or `memory`: a memory stream loses every job when the server
    stops, so it is chosen only by asking for it, and the queue then says it is lossy."""
    replicas: int = 1
    lease: timedelta = DEFAULT_LEASE
    """The consumers' `ack_wait`: how long a reserved job stays hidden without a renewal."""
    duplicate_window: timedelta = DEFAULT_DUPLICATE_WINDOW
    max_deliver: int = DEFAULT_MAX_DELIVER
    sweep_every: timedelta = DEFAULT_SWEEP_EVERY
    publish_timeout: timedelta = DEFAULT_PUBLISH_TIMEOUT
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    nkey: str | None = field(default=None, repr=False)
    """The path of an NKey seed file."""
    creds: str | None = field(default=None, repr=False)
    """The path of a credentials file (a user JWT and its NKey seed)."""
    tls: bool = False
    tls_ca: str | None = None
    insecure_skip_verify: bool = False

    OPTIONS: ClassVar[frozenset[str]] = OPTIONS

    @classmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """Every key of the query: nats-py reads none of it."""
        if urlsplit(url).scheme.lower() != "nats":
            raise ConfigurationError(
                f"the nats driver takes a `nats://` URL (`tls=true` for TLS), not {redact_url(url)}"
            )
        return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))

    @classmethod
    def build(cls, url: str, options: Options) -> Self:
        parts = urlsplit(url)
        storage = options.text("storage", "file").lower()
        if storage not in STORAGES:
            raise ConfigurationError(
                f"`storage` is `file` (jobs survive a restart) or `memory` (they do not), "
                f"not {storage!r}"
            )
        authority = options.get("tls_ca") or None
        want_tls = options.flag("tls", authority is not None)  # an authority asks for TLS
        if authority is not None and not want_tls:
            raise ConfigurationError(
                "tls=false, but `tls_ca` names an authority to check the server's TLS "
                "certificate with: drop `tls=false` to use TLS, or drop `tls_ca`"
            )
        skip = tls.insecure(options.get(tls.INSECURE), where="the `nats` driver")
        if skip and not want_tls:
            raise ConfigurationError(
                f"{tls.INSECURE}=true, but this URL does not use TLS, so there is no "
                "certificate to skip checking: add `tls=true`, or drop it"
            )
        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        token = None
        if user is not None and password is None:
            user, token = None, user  # nats://TOKEN@host
        return cls(
            servers=parse_servers(parts.netloc, "tls" if want_tls else "nats"),
            url=url,
            prefix=options.prefix("prefix", DEFAULT_PREFIX, check_prefix),
            storage=storage,
            replicas=options.count("replicas", 1, minimum=1),
            lease=options.lease(DEFAULT_LEASE),
            duplicate_window=options.positive_duration(
                "duplicate_window", DEFAULT_DUPLICATE_WINDOW
            ),
            max_deliver=options.count("max_deliver", DEFAULT_MAX_DELIVER, minimum=2),
            sweep_every=options.positive_duration("sweep_every", DEFAULT_SWEEP_EVERY),
            publish_timeout=options.positive_duration("publish_timeout", DEFAULT_PUBLISH_TIMEOUT),
            user=user,
            password=password,
            token=token,
            nkey=options.get("nkey") or None,
            creds=options.get("creds") or None,
            tls=want_tls,
            tls_ca=authority,
            insecure_skip_verify=skip,
        )

    @property
    def lossy(self) -> bool:
        """Whether the stream is kept in memory, so a server restart loses its jobs."""
        return self.storage == "memory"

    def describe(self) -> str:
        return f"nats {', '.join(self.servers)} prefix={self.prefix!r} storage={self.storage}"

    def __repr__(self) -> str:  # credentials must not show, even in a debugger
        return f"NATSSettings({self.describe()})"


def parse_servers(netloc: str, scheme: str) -> tuple[str, ...]:
    """`host:port,host` as server URLs without credentials, port 4222 where none is given."""
    hosts = netloc.rsplit("@", 1)[-1]
    servers: list[str] = []
    for seed in filter(None, (part.strip() for part in hosts.split(","))):
        host, colon, port = seed.rpartition(":")
        if not colon or "]" in port:
            host, port = seed, "4222"
        if not host or not port.isdigit():
            raise ConfigurationError(
                f"a nats URL lists servers as host:port,host:port; cannot read {seed!r}"
            )
        servers.append(f"{scheme}://{host}:{port}")
    if not servers:
        raise ConfigurationError("a nats URL needs at least one server: nats://host:4222")
    return tuple(servers)


__all__ = ["OPTIONS", "NATSSettings", "check_prefix", "parse_servers"]
