# SPDX-License-Identifier: MIT
"""The TLS rules every server driver keeps: verify by default, skip only when told, say why.

Two mistakes keep turning up in job queues' bug trackers. One is switching
certificate checks off to make an error go away (`ssl_cert_reqs=none`,
`sslmode=require`) and forgetting it, so the connection is encrypted but
anybody in the middle can read it. The other is a certificate that cannot
be verified showing up as "connection refused", which a worker treats as an
outage and waits out for ever while the real fix is a file or a host name.

So each driver: verifies the server's certificate whenever it speaks TLS;
refuses a URL that weakens that unless it also says `insecure_skip_verify=true`,
and then logs a warning (for each connection where the client library shows
us each one, PostgreSQL's; once per client or pool on Redis and MySQL); and
turns a failed verification into `TLSVerificationError`, naming the host and
what to do.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl

from ..errors import ConfigurationError, TLSVerificationError
from ..flags import parse_flag

log = logging.getLogger("rainier_queue.tls")

INSECURE = "insecure_skip_verify"
"""The URL option that accepts a server certificate without checking it."""

_SIGNS = (
    "certificate verify failed",
    "does not match host name",
    "root certificate file",
    "hostname mismatch",
)
"""What clients say when a certificate fails its check (OpenSSL, libpq), lower case. Only
connection errors are looked at, so a query's own error text cannot match by chance."""


def insecure(value: object, *, where: str) -> bool:
    """The `insecure_skip_verify` option's value (None when not given): yes or no."""
    if value is None:
        return False
    try:
        return parse_flag(value, setting=INSECURE)
    except ConfigurationError:
        raise ConfigurationError(
            f"{where}: {INSECURE}={value!r} is neither true nor false; remove it to verify the "
            "server's certificate (the default), or set it to true to accept any certificate"
        ) from None


def warn_unverified(where: str) -> None:
    """Log that a connection to `where` does not check who it talks to."""
    log.warning(
        "TLS to %s is used without verifying its certificate (%s=true): "
        "the traffic is encrypted, but anyone between here and there could be the server",
        where,
        INSECURE,
    )


def is_remote(host: str | None) -> bool:
    """Whether `host` is reached over a network (None: a Unix socket, this machine)."""
    if host is None or host.strip("[]").lower() in ("", "localhost"):
        return False
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return True  # a name other than localhost: assume another machine


def transport_warnings(
    where: str, *, encrypted: bool, verified: bool, remote: bool, fix: str
) -> list[str]:
    """What `doctor` says of how jobs travel to the server at `where` (`fix`: how to use TLS)."""
    if not encrypted:
        if not remote:
            return []
        return [
            f"the connection to {where} is not encrypted, so jobs and passwords cross the "
            f"network in the clear; {fix}"
        ]
    if not verified:
        return [
            f"the TLS certificate of {where} is not checked ({INSECURE}=true), so whoever "
            f"sits between here and the server can pose as it; {fix}"
        ]
    return []


def is_verification_failure(exc: BaseException) -> bool:
    """Whether `exc`, or anything it was raised from, is a failed certificate check."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        text = str(current).lower()
        if any(sign in text for sign in _SIGNS):
            return True
        current = current.__cause__ or current.__context__
    return False


def verification_failed(
    server: str, host: str, exc: BaseException, *, fix: str
) -> TLSVerificationError:
    """The error for `server` (say, "the Redis server") at `host`, whose certificate failed."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return TLSVerificationError(
        f"the TLS certificate of {server} at {host} could not be verified ({first}); this is "
        f"not an outage that waiting fixes: {fix}",
        host=host,
    )


__all__ = [
    "INSECURE",
    "insecure",
    "is_remote",
    "is_verification_failure",
    "transport_warnings",
    "verification_failed",
    "warn_unverified",
]
