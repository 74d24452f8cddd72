# SPDX-License-Identifier: MIT
"""Building a redis-py client from a URL, and the one place its errors are translated.

The URL is redis-py's own (`redis://`, `rediss://` with TLS, `unix://` for
a socket file on this machine), plus a seed list for clusters:
`redis-cluster://host:port,host:port/?prefix=app:`, or a `redis://` or
`rediss://` URL with `cluster=true`. This library's own settings may ride in
the query string (`prefix`, `lease`, `cluster`, `consumer`, `wait_replicas`,
`wait_timeout`); they are taken out before redis-py sees the rest.

TLS (`rediss://`) checks the server's certificate and host name, as redis-py
does by default. A URL that turns either check off (`ssl_cert_reqs=none`,
`ssl_check_hostname=false`) is refused unless it also says
`insecure_skip_verify=true` (the rules are in `drivers/tls.py`), and a
certificate that fails its check is a `TLSVerificationError`, not an outage.

Every call a driver makes goes through `translated()`, so the worker sees
`BrokerUnavailable` (ride it out) or `BrokerRejected` (a bug or a refused
command) and never a redis-py class.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

from ...errors import BrokerRejected, BrokerUnavailable, ConfigurationError, UnknownOption
from ...redact import redact_url
from .. import tls

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

Client = Redis | RedisCluster
"""Either client; both speak the commands this package uses."""


def split_options(url: str, ours: Iterable[str]) -> tuple[str, dict[str, str]]:
    """`url` without the query parameters named in `ours`, and those parameters."""
    parts = urlsplit(url)
    wanted = set(ours)
    kept: list[tuple[str, str]] = []
    taken: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in wanted:
            taken[key] = value
        else:
            kept.append((key, value))
    return _with_query(parts, kept), taken


def connect(url: str, *, cluster: bool, decode: bool, ours: Iterable[str] = ()) -> Client:
    """A client for `url` (already stripped of this library's options `ours`). Connects lazily.

    A query parameter neither this library nor redis-py takes (a typo) is an
    `UnknownOption` now, not a `TypeError` at the first command.
    """
    url = _tls_checked(url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix", "redis-cluster"):
        raise ConfigurationError(f"not a Redis URL scheme: {scheme!r}")
    if scheme == "unix":
        _check_socket_url(parts, cluster=cluster)
    if cluster or scheme == "redis-cluster":
        database = parts.path.strip("/")
        if database not in ("", "0"):
            raise ConfigurationError(
                f"a Redis cluster has only database 0; remove /{database} from the URL "
                "(use `prefix` to keep applications apart)"
            )
    if scheme == "redis-cluster":
        for key, _ in parse_qsl(parts.query, keep_blank_values=True):
            # redis-py never sees this URL, so none of its own options apply here.
            raise UnknownOption("a redis-cluster URL", key, set(ours))
        return _cluster_from_seeds(url, decode=decode)
    try:
        if cluster:
            return RedisCluster.from_url(url, decode_responses=decode, **text_errors(decode))
        client = Redis.from_url(url, decode_responses=decode, **text_errors(decode))
        pool = client.connection_pool
        pool.connection_class(**pool.connection_kwargs)  # builds, does not connect
    except TypeError as exc:
        named = re.search(r"argument '([^']+)'", str(exc))
        name = named.group(1) if named else str(exc)
        if name in URL_QUERY_ARGUMENT_PARSERS:  # redis-py's, but not for this kind of link
            raise ConfigurationError(_not_for(name, scheme)) from None
        known = {*ours, *URL_QUERY_ARGUMENT_PARSERS}
        raise UnknownOption("a Redis URL", name, known) from None
    return client


def socket_timeout(client: Client) -> float:
    """The read timeout `client` gives every command, BLPOP's included (`math.inf`: none).

    redis-py 8 sets 5 s unless the URL says otherwise (earlier versions set none),
    as a default of its connection class rather than in the pool's settings, so
    a connection is built (not connected) to read it.
    """
    if isinstance(client, RedisCluster):
        value = client.nodes_manager.connection_kwargs.get("socket_timeout")
    else:
        pool = client.connection_pool
        kwargs = pool.connection_kwargs
        if "socket_timeout" in kwargs:
            value = kwargs["socket_timeout"]
        else:
            value = pool.connection_class(**kwargs).socket_timeout
    return float(value) if value else math.inf


_WEAKENING = {
    "ssl_cert_reqs": ("none", "optional"),
    "ssl_check_hostname": ("false", "no", "off", "0", ""),
}
"""redis-py's URL options, and the values of them that skip part of the certificate check."""


def _tls_checked(url: str) -> str:
    """`url` without `insecure_skip_verify`, once its TLS settings are known to be meant.

    A `rediss://` URL that turns off part of the certificate check must say
    `insecure_skip_verify=true` too; with it, both checks are off and a
    warning is logged. Without TLS, asking to skip its check is a mistake.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = dict(query)
    where = redact_url(url)
    skip = tls.insecure(options.get(tls.INSECURE), where=where)
    if parts.scheme.lower() != "rediss":
        if skip:
            raise ConfigurationError(
                f"{where}: {tls.INSECURE}=true, but this URL does not use TLS, so there is no "
                "certificate to skip checking; use a rediss:// URL for TLS, or remove the option"
            )
        return url if tls.INSECURE not in options else _without(parts, query, tls.INSECURE)
    weakened = [
        f"{name}={options[name]}"
        for name, values in _WEAKENING.items()
        if name in options and options[name].strip().lower() in values
    ]
    if weakened and not skip:
        raise ConfigurationError(
            f"{where}: {', '.join(weakened)} turns off part of the check of the server's TLS "
            "certificate, so anyone between here and the server could pose as it. Give the "
            "client the certificate authority that signed the server's certificate "
            "(ssl_ca_certs=/path/to/ca.pem) instead, or, to accept any certificate knowingly, "
            f"add {tls.INSECURE}=true"
        )
    if not skip:
        return _without(parts, query, tls.INSECURE)
    tls.warn_unverified(where)
    kept = [(k, v) for k, v in query if k not in (tls.INSECURE, *_WEAKENING)]
    kept += [("ssl_cert_reqs", "none"), ("ssl_check_hostname", "false")]
    return _with_query(parts, kept)


def transport_warnings(url: str) -> list[str]:
    """What `doctor` says of how jobs travel to the Redis at `url`: in the clear, or unchecked."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    hosts: list[str | None] = []
    if scheme == "unix":
        hosts.append(None)
    else:
        for seed in parts.netloc.rsplit("@", 1)[-1].split(","):
            host = seed.rpartition(":")[0] if seed.rpartition(":")[2].isdigit() else seed
            hosts.append(host or "localhost")
    skip = dict(parse_qsl(parts.query, keep_blank_values=True)).get(tls.INSECURE)
    return tls.transport_warnings(
        f"Redis at {redact_url(url.split('?', 1)[0])}",
        encrypted=scheme == "rediss",
        verified=not tls.insecure(skip, where=redact_url(url)),
        remote=any(tls.is_remote(host) for host in hosts),
        fix="serve TLS and use a rediss:// URL, with ssl_ca_certs= if your own authority "
        "signed the server's certificate",
    )


def _without(parts: SplitResult, query: list[tuple[str, str]], name: str) -> str:
    return _with_query(parts, [(k, v) for k, v in query if k != name])


def _with_query(parts: SplitResult, query: list[tuple[str, str]]) -> str:
    """The URL of `parts` with `query` as its query string.

    Built by hand rather than with `urlunsplit`, which writes `unix:///run/x.sock`
    back as `unix:/run/x.sock` (no host, so no `//`); redis-py 8 refuses that form.
    """
    url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if query:
        url += f"?{urlencode(query)}"
    return f"{url}#{parts.fragment}" if parts.fragment else url


def _check_socket_url(parts: SplitResult, *, cluster: bool) -> None:
    """A `unix://` URL names a socket file on this machine: no host, no port, no cluster."""
    if cluster:
        raise ConfigurationError(
            "a Redis Cluster cannot be reached over a Unix socket (its nodes give each other's "
            "addresses as host and port); use redis-cluster://host:port,host:port, or remove "
            "cluster=true from the unix:// URL"
        )
    if parts.hostname:
        raise ConfigurationError(
            f"a unix:// URL names a socket file, not a host (got host {parts.hostname!r}); "
            "write unix:///path/to/redis.sock with three slashes, or use redis://host:port/0 "
            "to connect over TCP"
        )
    if parts.path.strip("/") == "":
        raise ConfigurationError(
            "a unix:// URL needs the path of Redis's socket, as in "
            "unix:///run/redis/redis.sock?db=0"
        )


def _not_for(name: str, scheme: str) -> str:
    """Why a redis-py setting is refused on a URL of `scheme`, and what to do."""
    if name.startswith("ssl_"):
        return (
            f"`{name}` is a TLS setting, and a {scheme}:// connection has no TLS; "
            "remove it, or use a rediss:// URL for TLS"
        )
    link = "a Unix-socket" if scheme == "unix" else f"a {scheme}://"
    return f"`{name}` does not apply to {link} connection; remove it from the URL"


def _cluster_from_seeds(url: str, *, decode: bool) -> RedisCluster:
    parts = urlsplit(url)
    hosts = parts.netloc.rsplit("@", 1)[-1]
    nodes: list[ClusterNode] = []
    for seed in filter(None, hosts.split(",")):
        host, _, port = seed.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigurationError(
                "a redis-cluster URL lists seeds as host:port,host:port; "
                f"got {seed!r} (the port is required)"
            )
        nodes.append(ClusterNode(host.strip("[]"), int(port)))
    if not nodes:
        raise ConfigurationError("a redis-cluster URL needs at least one host:port seed")
    kwargs: dict[str, Any] = {}
    if parts.username:
        kwargs["username"] = parts.username
    if parts.password:
        kwargs["password"] = parts.password
    kwargs.update(text_errors(decode))
    return RedisCluster(startup_nodes=nodes, decode_responses=decode, **kwargs)


def text_errors(decode: bool) -> dict[str, Any]:
    """Replies that are not UTF-8 are kept, as surrogate escapes, instead of raising.

    Anything may write into a stream; with redis-py's strict default one such
    entry makes every reply that carries it fail in the reader, before any
    of our code sees it, and stops every worker that reserves it. Kept this
    way, the reading code refuses it with the field named (and gives the
    bytes back exactly, `surrogateescape` being reversible).
    """
    return {"encoding_errors": "surrogateescape"} if decode else {}


class Ready:
    """Initialises a cluster client once, before its first command.

    redis-py's asyncio cluster client discovers the cluster lazily, and
    several commands issued at once on a fresh client can break each other's
    connections (seen with redis-py 8.1: `'NoneType' object has no attribute
    'writelines'`). Discovering it once, under a lock, before anything else
    runs avoids that; a plain client needs nothing.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._cold = isinstance(client, RedisCluster)
        self._lock: asyncio.Lock | None = None

    async def __call__(self) -> Client:
        if self._cold:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock, translated("connect to the Redis cluster"):
                if self._cold:
                    await cast(RedisCluster, self.client).initialize()
                    self._cold = False
        return self.client


class Calls:
    """The client as the queue's parts share it: ready before its first command, each Lua
    script registered once, and every script run inside `translated`."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.ready = Ready(client)
        self._scripts: dict[str, AsyncScript] = {}

    def script(self, source: str) -> AsyncScript:
        """The script of `source`, registered with the client the first time."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.client.register_script(source)
        return script

    async def run(self, source: str, keys: Sequence[str], args: Sequence[Any], what: str) -> Any:
        """Run the script of `source`; its reply, or the error tree's error naming `what`."""
        await self.ready()
        async with translated(what):
            return await self.script(source)(keys=list(keys), args=list(args))


@contextlib.asynccontextmanager
async def translated(what: str) -> AsyncIterator[None]:
    """Turn redis-py's exceptions into this library's, naming what was being done."""
    try:
        yield
    except (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError) as exc:
        # redis-py files a refused password under ConnectionError, but waiting
        # does not fix a wrong password: it is the URL that has to change.
        raise ConfigurationError(
            f"Redis refused the credentials while trying to {what} "
            f"({str(exc).rstrip('.')}); fix the user name "
            "and password in the URL (redis://user:password@host:port), or grant that ACL "
            "user the commands and keys the queue needs"
        ) from exc
    except (rx.ConnectionError, rx.TimeoutError, rx.ClusterDownError, rx.TryAgainError) as exc:
        if tls.is_verification_failure(exc):
            server = _server_in(exc)
            raise tls.verification_failed("the Redis server", server, exc, fix=TLS_FIX) from exc
        raise BrokerUnavailable(f"Redis is unreachable while trying to {what}: {exc}") from exc
    except rx.ResponseError as exc:
        raise refusal(what, exc) from exc
    except rx.RedisClusterException as exc:
        raise BrokerUnavailable(f"the Redis cluster could not {what}: {exc}") from exc
    except rx.RedisError as exc:
        raise BrokerRejected(f"Redis failed to {what}: {exc}") from exc


TLS_FIX = (
    "give the client the certificate authority that signed the server's certificate "
    "(ssl_ca_certs=/path/to/ca.pem in the URL), make the URL's host one the certificate names, "
    f"or, to accept any certificate knowingly, add {tls.INSECURE}=true"
)


def _server_in(exc: BaseException) -> str:
    """The host:port a redis-py connection error names ("Error 1 connecting to h:p.")."""
    found = re.search(r"connecting to (\S+?:\d+)", str(exc))
    return found.group(1) if found else "an address redis-py did not say"


_PASSING = ("READONLY", "MASTERDOWN", "NOREPLICAS", "BUSY ", "LOADING", "TRYAGAIN")
"""Refusals that say the server cannot take writes for now, not that the request is wrong."""
_PASSING_CLASSES = (rx.ReadOnlyError, rx.TryAgainError, rx.ClusterDownError)
"""The same, for a replica, a slot being migrated (TRYAGAIN), and a cluster that is down."""


def refusal(what: str, exc: rx.ResponseError) -> BrokerRejected | BrokerUnavailable:
    """What a Redis error reply means to the worker: a refusal, or an outage to ride out.

    A server that became a replica in a failover answers writes with
    READONLY until the URL points at the new primary; one that lost its
    primary, or its replicas, says so too. None of that is the request's
    fault, and none of it wrote anything, so the caller waits and tries
    again rather than failing jobs.
    """
    text = str(exc)
    # redis-py strips the code off the errors it has a class for: those go by class.
    if isinstance(exc, _PASSING_CLASSES) or text.startswith(_PASSING):
        hint = ""
        if isinstance(exc, rx.ReadOnlyError) or text.startswith("READONLY"):
            hint = (
                "; this server is a read-only replica now (a failover?): "
                "point the URL at the primary"
            )
        elif isinstance(exc, rx.TryAgainError):
            hint = (
                "; the slot is being migrated between cluster nodes: nothing was written, "
                "try again once the migration is done"
            )
        return BrokerUnavailable(f"Redis cannot {what} for now: {exc}{hint}")
    return BrokerRejected(f"Redis refused to {what}: {exc}")


__all__ = [
    "Calls",
    "Client",
    "Ready",
    "connect",
    "refusal",
    "split_options",
    "translated",
    "transport_warnings",
]
