# SPDX-License-Identifier: MIT
"""Where a MySQL or MariaDB server is, how to trust it, and whether it is new enough.

Why apart from the pool: the queue, the lock store and the settings all
read the same URL and TLS options, and a mistake in them must be a
`ConfigurationError` at start-up, before any connection is tried. This is
that reading, with no connection in it; connection.py opens the pool from
what it returns and checks the server's version here once connected.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ....errors import BrokerRejected, ConfigurationError
from ....flags import parse_flag
from ....redact import redact_url
from ... import tls

MARIADB_MINIMUM = (10, 6)
"""The first MariaDB with `SELECT ... FOR UPDATE SKIP LOCKED`."""
MYSQL_MINIMUM = (8, 0, 1)
"""The first MySQL with it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerAddress:
    """Where the server is and who to log in as, read from a `mysql://` URL."""

    host: str
    port: int
    user: str
    password: str
    database: str
    url: str
    """The URL without its query, for `describe` (always through `redact_url`)."""

    @classmethod
    def from_url(cls, url: str, *, what: str) -> tuple[ServerAddress, dict[str, str]]:
        """The address and the query options of `mysql://user:password@host:port/database`."""
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("mysql", "mariadb"):
            raise ConfigurationError(f"{what} takes a `mysql://` or `mariadb://` URL")
        database = unquote(parts.path).lstrip("/")
        if not database or "/" in database:
            raise ConfigurationError(
                f"{what} needs a database in its URL, such as "
                f"`mysql://user@127.0.0.1:3306/app`; got {redact_url(url)!r}"
            )
        try:
            port = parts.port or 3306
        except ValueError as exc:
            raise ConfigurationError(f"{what}: bad port in {redact_url(url)!r}") from exc
        address = cls(
            host=parts.hostname or "localhost",
            port=port,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            database=database,
            url=url.split("?", 1)[0],
        )
        return address, dict(parse_qsl(parts.query, keep_blank_values=True))

    def describe(self) -> str:
        return redact_url(self.url)

    @property
    def endpoint(self) -> str:
        """`host:port`, as a `TLSVerificationError` names the server."""
        return f"{self.host}:{self.port}"


TLS_OPTIONS = frozenset({"ssl", "ssl_ca", "ssl_cert", "ssl_key", tls.INSECURE})
"""The URL options that ask for TLS and say how to check the server."""

TLS_FIX = (
    "give the client the certificate authority that signed the server's certificate "
    "(ssl_ca=/path/to/ca.pem in the URL), make the URL's host one the certificate names, or, "
    f"to accept any certificate knowingly, add {tls.INSECURE}=true"
)


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """How MySQL connections speak TLS: whom to trust, which client certificate, whether to check.

    Built from the URL's options (`from_options`), so a missing file or a
    contradiction is a `ConfigurationError` at startup, not a failed connect.
    """

    context: ssl.SSLContext
    verify: bool

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, where: str) -> ClientTLS | None:
        """The TLS asked for by `ssl`, `ssl_ca`, `ssl_cert`/`ssl_key` and `insecure_skip_verify`.

        None when none of them asks for TLS: the connection is then plain.
        """
        wanted = parse_flag(options.get("ssl", False), setting="ssl")
        ca, cert, key = (options.get(name) or None for name in ("ssl_ca", "ssl_cert", "ssl_key"))
        skip = tls.insecure(options.get(tls.INSECURE), where=where)
        if wanted is False and "ssl" in options and (ca or cert or skip):
            raise ConfigurationError(
                f"{where}: ssl=false, but ssl_ca, ssl_cert or {tls.INSECURE} asks for TLS; "
                "remove one of them"
            )
        if not (wanted or ca or cert or key or skip):
            return None
        if skip and ca:
            raise ConfigurationError(
                f"{where}: ssl_ca names an authority to check the server against, and "
                f"{tls.INSECURE}=true says not to check it; remove one of them"
            )
        if bool(cert) != bool(key):
            raise ConfigurationError(
                f"{where}: a client certificate needs both ssl_cert and ssl_key (got only "
                f"{'ssl_cert' if cert else 'ssl_key'})"
            )
        try:
            context = ssl.create_default_context(cafile=str(ca) if ca else None)
            if cert:
                context.load_cert_chain(str(cert), str(key))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"{where}: cannot load the TLS files: {exc}") from exc
        if skip:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return cls(context=context, verify=not skip)


def parse_version(text: str) -> tuple[str, tuple[int, ...]]:
    """(`mariadb` or `mysql`, the version numbers) from `SELECT VERSION()`."""
    flavour = "mariadb" if "mariadb" in text.lower() else "mysql"
    # MariaDB once prefixed its version with `5.5.5-` for old clients.
    text = text.removeprefix("5.5.5-")
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if found is None:
        raise BrokerRejected(f"cannot read the server version {text!r}")
    return flavour, tuple(int(part) for part in found.groups() if part is not None)


def check_version(text: str) -> None:
    """Refuse a server without `SKIP LOCKED`, naming the version that has it."""
    flavour, version = parse_version(text)
    if flavour == "mariadb" and version < MARIADB_MINIMUM:
        raise BrokerRejected(
            f"MariaDB {text} is too old for the mysql driver: it needs MariaDB 10.6 or newer "
            "(for SELECT ... FOR UPDATE SKIP LOCKED)"
        )
    if flavour == "mysql" and version < MYSQL_MINIMUM:
        raise BrokerRejected(
            f"MySQL {text} is too old for the mysql driver: it needs MySQL 8.0.1 or newer "
            "(for SELECT ... FOR UPDATE SKIP LOCKED)"
        )


__all__ = [
    "MARIADB_MINIMUM",
    "MYSQL_MINIMUM",
    "TLS_FIX",
    "TLS_OPTIONS",
    "ClientTLS",
    "ServerAddress",
    "check_version",
    "parse_version",
]
