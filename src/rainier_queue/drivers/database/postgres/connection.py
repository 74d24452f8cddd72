# SPDX-License-Identifier: MIT
"""What the PostgreSQL queue and the PostgreSQL cache share: URL, pool, clock, errors.

Both stores take the same URL (`postgresql://user@host:5432/db?prefix=app_`),
whose query mixes this library's options with libpq's own (`sslmode`,
`application_name`, ...). Ours are taken out here, before the DSN reaches
libpq, which would refuse them; what is left is checked by libpq's own
parser at configuration time, so a typo fails at startup rather than as an
outage the worker waits out forever.

psycopg raises one tree of exceptions for a refused connection, a missing
table and a bad value alike; the worker must tell an outage (wait) from a
refusal (tell a human). That translation happens in `translated`, the one
place every PostgreSQL call in this library goes through.

TLS: libpq's `sslmode=require` and `verify-ca` encrypt without checking that
the server is the one the URL names. Hosted services put `sslmode=require` in
the URLs they hand out, meaning "use TLS", so both are taken as `verify-full`
(against the system's authorities unless `sslrootcert` names one); only
`insecure_skip_verify=true` keeps libpq's unchecked meaning (then every
connection logs a warning). A certificate that fails its check is a
`TLSVerificationError`, not an outage (the rules are in `drivers/tls.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg_pool import AsyncConnectionPool

from ....errors import (
    BrokerRejected,
    BrokerUnavailable,
    ConfigurationError,
    DuplicateJob,
    OutcomeUnknown,
    TLSVerificationError,
    UnknownOption,
)
from ....redact import redact_url
from ... import tls
from .plans import plan_once

NOW_US = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint"
"""The server's clock in microseconds since the epoch, as an SQL expression.

`clock_timestamp()`, not `now()`: `now()` is frozen at the transaction's
start, and a lease must end a lease's length after the claim, not after
whenever the transaction began."""

DEFAULT_POOL_TIMEOUT = timedelta(seconds=10)
"""How long a call waits for a pooled connection (or for the server) before the
store reports `BrokerUnavailable`, which the worker rides out."""


UNVERIFIED_MODES = ("require", "verify-ca")
"""libpq's `sslmode`s that encrypt but do not check the server's host name."""

TLS_FIX = (
    "sslmode=require and verify-ca are checked as verify-full here, against the system's "
    "authorities unless sslrootcert names one; "
    "use sslmode=verify-full with sslrootcert=/path/to/ca.pem (the authority that signed the "
    "server's certificate; sslrootcert=system takes the system's, on libpq 16 and later), make "
    f"the URL's host one the certificate names, or, to accept any certificate knowingly, add "
    f"{tls.INSECURE}=true"
)


def split_url(
    url: str, ours: frozenset[str], *, insecure: bool = False
) -> tuple[str, dict[str, str]]:
    """(the DSN for libpq, this library's options taken from the URL's query).

    The DSN is checked by libpq's own parser here, so an option libpq does not
    know (a typo, or one of ours misspelt) is a configuration error now. So
    are TLS settings that skip the certificate check, unless `insecure` or the
    URL's own `insecure_skip_verify=true` accepts that.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise ConfigurationError(
            f"the postgres driver takes a `postgresql://` URL, not {redact_url(url)!r}"
        )
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    options = {k: v for k, v in pairs if k in ours}
    rest = [(k, v) for k, v in pairs if k not in ours and k != tls.INSECURE]
    given = dict(pairs).get(tls.INSECURE)
    skip = tls.insecure(given, where=redact_url(url)) or insecure
    rest = _tls_checked(rest, skip=skip, where=redact_url(url))
    # quote, not quote_plus: libpq reads a `+` as a plus sign, not a space.
    query = urlencode(rest, quote_via=quote)
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, query, ""))
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        # A near miss of one of ours (`prefx`) is a typo of ours, not a libpq option.
        named = re.search(r'invalid URI query parameter: "([^"]+)"', str(exc))
        if named and difflib.get_close_matches(named.group(1), sorted(ours), n=1):
            where = "a PostgreSQL URL, whose query holds this library's options and libpq's,"
            raise UnknownOption(where, named.group(1), ours) from None
        raise ConfigurationError(
            f"libpq cannot use the URL {redact_url(url)}: {str(exc).strip()} "
            f"(this library's own options are: {', '.join(sorted(ours))})"
        ) from None
    return dsn, options


def _tls_checked(pairs: list[tuple[str, str]], *, skip: bool, where: str) -> list[tuple[str, str]]:
    """libpq's options, once their TLS settings are known to be meant (see the module doc)."""
    given = dict(pairs).get("sslmode")
    mode = (given if given is not None else os.environ.get("PGSSLMODE", "")).strip().lower()
    source = "sslmode" if given is not None else "PGSSLMODE"
    if not skip:
        if mode in UNVERIFIED_MODES:
            return _verified(pairs)
        return pairs
    if mode == "verify-full":
        raise ConfigurationError(
            f"{where}: {source}=verify-full asks for the certificate check that "
            f"{tls.INSECURE}=true turns off; remove one of them"
        )
    if mode == "disable":
        raise ConfigurationError(
            f"{where}: {tls.INSECURE}=true, but {source}=disable turns TLS off, so there is no "
            "certificate to skip checking; remove one of them"
        )
    if mode in UNVERIFIED_MODES:
        return pairs
    # Not given, `prefer` or `allow`: TLS if the server offers it. Accepting any
    # certificate is only worth saying for a connection that must be encrypted.
    return [*[(k, v) for k, v in pairs if k != "sslmode"], ("sslmode", "require")]


def _verified(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`sslmode=require` or `verify-ca` taken as `verify-full`, against the system's authorities
    unless the URL names its own (`sslrootcert`).

    Hosted PostgreSQL services hand out URLs with `sslmode=require`, which in
    libpq encrypts but accepts any certificate. Refusing those URLs sent users
    to `insecure_skip_verify=true`, the opposite of what they meant; so the
    mode is raised to what they meant: encrypted, and the server checked.
    A service whose certificate no system authority signed fails that check
    with a `TLSVerificationError` saying to give its authority (`sslrootcert`).
    """
    rest = [(k, v) for k, v in pairs if k != "sslmode"]
    if "sslrootcert" not in dict(rest):
        authorities = _system_authorities()
        if authorities is not None:
            rest.append(("sslrootcert", authorities))
    return [*rest, ("sslmode", "verify-full")]


def _system_authorities() -> str | None:
    """`system` where libpq knows it (16 and later), else the system's CA file, if any."""
    if psycopg.pq.version() >= 160000:
        return "system"
    import ssl

    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def unverified(dsn: str) -> bool:
    """Whether connections made with `dsn` take the server's certificate unchecked."""
    mode = psycopg.conninfo.conninfo_to_dict(dsn).get("sslmode")
    if mode is None:
        mode = os.environ.get("PGSSLMODE", "")
    return str(mode).strip().lower() in UNVERIFIED_MODES


def describe_dsn(dsn: str) -> str:
    """The DSN for logs and errors: no password, no query options."""
    return f"postgres {redact_url(dsn)}"


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
    """Turn psycopg's exceptions into ours, keeping the original as the cause."""
    try:
        yield
    except psycopg.errors.UndefinedTable as exc:
        raise BrokerRejected(
            f"{where} lacks the queue's tables ({_first_line(exc)}); run "
            "`rainier-queue provision`, or open the queue with migrate = true"
        ) from exc
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError(
            f"{where}: the role lacks a privilege the queue needs ({_first_line(exc)}); grant "
            "it the use of the queue's schema and tables, or connect as a role that has it"
        ) from exc
    except psycopg.OperationalError as exc:
        if tls.is_verification_failure(exc):
            server = _host_of(where)
            raise tls.verification_failed("PostgreSQL", server, exc, fix=TLS_FIX) from exc
        if "server does not support ssl" in str(exc).lower():
            server = _host_of(where)
            raise TLSVerificationError(
                f"PostgreSQL at {server} does not offer TLS, which this connection was to use, "
                "so it is not used: turn ssl on in the server, or set sslmode=disable in the "
                "URL to connect in the clear",
                host=server,
            ) from exc
        if (fix := _settings_fix(exc)) is not None:
            raise ConfigurationError(f"{where}: {_server_said(exc)}; {fix}") from exc
        # Refused or dropped connections, pool timeouts, an admin shutdown,
        # serialization failures and deadlocks: all worth trying again.
        raise BrokerUnavailable(f"{where} is unavailable: {_first_line(exc)}") from exc
    except psycopg.InterfaceError as exc:  # a connection closed under us
        raise BrokerUnavailable(f"{where} is unavailable: {_first_line(exc)}") from exc
    except psycopg.errors.UniqueViolation as exc:
        if (exc.diag.constraint_name or "").endswith("jobs_id"):
            raise DuplicateJob(
                f"{where} holds a job with that id already: {_first_line(exc)}"
            ) from exc
        raise BrokerRejected(f"{where} refused the operation: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise BrokerRejected(f"{where} refused the operation: {_first_line(exc)}") from exc


_WRONG_SETTINGS = (
    (
        re.compile(r'database "(?P<name>[^"]*)" does not exist'),
        "create it (createdb {name}) or fix the database name in the URL",
    ),
    (
        re.compile(r'role "(?P<name>[^"]*)" does not exist'),
        "create the role (createuser {name}) or fix the user name in the URL",
    ),
    (
        re.compile(r"password authentication failed for user"),
        "fix the password in the URL (or in PGPASSWORD / ~/.pgpass)",
    ),
    (
        re.compile(r"no pg_hba\.conf entry"),
        "allow this host, user and database in the server's pg_hba.conf, "
        "or connect as one it allows",
    ),
    (
        re.compile(r"permission denied for database"),
        "grant the role CONNECT on that database, or connect as one that has it",
    ),
)
"""Connection refusals no wait will fix, each with what to do. libpq sends no SQLSTATE
for a failed connection, so they are told apart by the server's message."""


def _settings_fix(exc: psycopg.OperationalError) -> str | None:
    """What to change when `exc` says the URL names the wrong database, role or password."""
    text = str(exc)
    for pattern, fix in _WRONG_SETTINGS:
        if found := pattern.search(text):
            return fix.format(**found.groupdict())
    return None


def _server_said(exc: BaseException) -> str:
    """The server's FATAL line without libpq's "connection to server at ... failed:" frame."""
    line = _first_line(exc)
    return line.split("FATAL:", 1)[-1].strip()


def _host_of(where: str) -> str:
    """host:port of a `describe_dsn` text ("postgres postgresql://user@host:port/db")."""
    url = where.split(" ", 1)[-1]
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    return f"{host}:{parts.port or 5432}"


ROLLED_BACK = frozenset({"40P01", "40001"})
"""deadlock_detected and serialization_failure: the server rolled the work back."""
ROLLBACK_RETRIES = 4
"""Runs of a statement or unit of work the server keeps rolling back, before giving up."""


def rolled_back(exc: BrokerUnavailable) -> bool:
    """Whether `exc` is the server rolling the work back (a deadlock's victim), so it can run
    again: nothing of it was applied."""
    cause = exc.__cause__
    return isinstance(cause, psycopg.Error) and cause.sqlstate in ROLLED_BACK


def outcome_unknown(where: str, exc: BaseException) -> OutcomeUnknown | None:
    """`OutcomeUnknown` if `exc` lost the connection after a write was sent; else None.

    An error the server sent (it has a SQLSTATE: a deadlock, a shutdown, a
    refusal) is an answer, and the write did not happen. A connection that
    failed with no answer read may have committed first.
    """
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and exc.sqlstate is None:
        return OutcomeUnknown(
            f"{where}: the connection was lost after the push was sent, so whether it was "
            f"written is unknown (it is not retried): {_first_line(exc)}"
        )
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSettings:
    """How many connections to keep, how long to wait for one, and how they run statements."""

    min_size: int = 1
    max_size: int = 10
    timeout: timedelta = DEFAULT_POOL_TIMEOUT
    prepared_statements: bool = True
    """Whether a statement run often is prepared on the server (psycopg's default).
    Off for PgBouncer in transaction mode, where the next transaction may land on
    a server connection that never saw the statement prepared."""

    def __post_init__(self) -> None:
        if self.min_size < 0 or self.max_size < 1 or self.min_size > self.max_size:
            raise ConfigurationError(
                f"the pool needs 0 <= pool_min <= pool_max and pool_max >= 1 "
                f"(got pool_min={self.min_size}, pool_max={self.max_size})"
            )


class Pool:
    """An `AsyncConnectionPool`, opened on first use in the loop that uses it."""

    def __init__(self, dsn: str, settings: PoolSettings, *, name: str) -> None:
        self.dsn = dsn
        self.settings = settings
        self.where = describe_dsn(dsn)
        self._name = name
        self._kwargs = connect_kwargs(dsn, name)
        if not settings.prepared_statements:
            self._kwargs["prepare_threshold"] = None
        self._unverified = unverified(dsn)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._closed = False
        self._sweep: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection (translated errors), given back when the block ends."""
        if self._closed:
            raise BrokerUnavailable(f"the connection pool to {self.where} is closed")
        with translated(self.where):
            if self._pool is None:
                # One direct connection first: an unreachable server fails now,
                # with libpq's reason, instead of as a pool timeout much later.
                probe = await psycopg.AsyncConnection.connect(self.dsn, **self._kwargs)
                await probe.close()
                if self._unverified:
                    tls.warn_unverified(self.where)
            if self._pool is None:  # another task may have made it meanwhile
                pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
                    self.dsn,
                    min_size=self.settings.min_size,
                    max_size=self.settings.max_size,
                    timeout=self.settings.timeout.total_seconds(),
                    name=self._name,
                    open=False,
                    kwargs=self._kwargs,
                    configure=self._configure,
                )
                self._pool = pool
                await pool.open(wait=False)
            async with self._pool.connection() as conn:
                try:
                    yield conn
                except BaseException:
                    if conn.broken:
                        self._sweep_idle()
                    raise

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """The pool's hook for each connection it opens: plans made once (see `plans`), and
        a warning when no connection checks the server."""
        if self.settings.prepared_statements:
            await plan_once(conn)
        if self._unverified:
            tls.warn_unverified(self.where)

    def _sweep_idle(self) -> None:
        """Test the idle connections now, in the background, after one was found dead.

        A server restart or failover kills every pooled connection at once,
        but each is found dead only when next used: without this, one call
        per pooled connection (a dispatch in a web request, say) would fail
        before the pool was clean again. One fails; the rest get fresh ones.
        """
        pool = self._pool
        if pool is None or (self._sweep is not None and not self._sweep.done()):
            return
        self._sweep = asyncio.get_running_loop().create_task(_check_idle(pool))

    async def aclose(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweep
            self._sweep = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


async def _check_idle(pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]]) -> None:
    with contextlib.suppress(Exception):  # the pool logs what it discards; a sweep is a favour
        await pool.check()


DEAD_PEER = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
"""How soon a connection whose server went silent is given up (libpq's defaults wait for hours).

A server that vanished without closing its connections (a failover to
another machine, a cable, a security group) leaves every query on them
waiting: the kernel retransmits for about fifteen minutes before it gives
up, and an idle connection is probed only after two hours. Sent data left
unacknowledged for 10 s (`tcp_user_timeout`, in ms) or an idle connection
that misses three probes 5 s apart after 10 s of quiet ends the connection
instead, which the worker then rides out as an outage. The kernel
acknowledges what it receives even when the server is too busy to answer,
so a slow query is not cut short by this."""


def connect_kwargs(dsn: str, role: str = "rainier-queue") -> dict[str, Any]:
    """What every connection this library opens is opened with.

    `role` names the connection in `pg_stat_activity` (`application_name`),
    unless the URL names it already; a DSN's own `connect_timeout`, and its
    own keepalive and `tcp_user_timeout` settings, win over `DEAD_PEER`.
    """
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = 10
    if "application_name" not in given:
        kwargs["application_name"] = role
    # libpq ignores these on a Unix socket, where a vanished server is noticed at once.
    kwargs.update({k: v for k, v in DEAD_PEER.items() if k not in given})
    return kwargs


__all__ = [
    "DEAD_PEER",
    "DEFAULT_POOL_TIMEOUT",
    "NOW_US",
    "ROLLBACK_RETRIES",
    "ROLLED_BACK",
    "Pool",
    "PoolSettings",
    "connect_kwargs",
    "describe_dsn",
    "outcome_unknown",
    "rolled_back",
    "split_url",
    "translated",
    "unverified",
]
