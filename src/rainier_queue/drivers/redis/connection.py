# SPDX-License-Identifier: MIT
"""Building a redis-py client from a URL, and the one place its errors are translated.

The URL is redis-py's own (`redis://`, `rediss://` with TLS), plus a seed
list for clusters: `redis-cluster://host:port,host:port/?prefix=app:`, or
any Redis URL with `cluster=true`. This library's own settings may ride in
the query string (`prefix`, `lease`, `cluster`, `consumer`, `wait_replicas`,
`wait_timeout`); they are taken out before redis-py sees the rest.

Every call a driver makes goes through `translated()`, so the worker sees
`BrokerUnavailable` (ride it out) or `BrokerRejected` (a bug or a refused
command) and never a redis-py class.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

from ...errors import BrokerRejected, BrokerUnavailable, ConfigurationError, UnknownOption

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
    return urlunsplit(parts._replace(query=urlencode(kept))), taken


def connect(url: str, *, cluster: bool, decode: bool, ours: Iterable[str] = ()) -> Client:
    """A client for `url` (already stripped of this library's options `ours`). Connects lazily.

    A query parameter neither this library nor redis-py takes (a typo) is an
    `UnknownOption` now, not a `TypeError` at the first command.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix", "redis-cluster"):
        raise ConfigurationError(f"not a Redis URL scheme: {scheme!r}")
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
            return RedisCluster.from_url(url, decode_responses=decode)
        client = Redis.from_url(url, decode_responses=decode)
        pool = client.connection_pool
        pool.connection_class(**pool.connection_kwargs)  # builds, does not connect
    except TypeError as exc:
        named = re.search(r"argument '([^']+)'", str(exc))
        known = {*ours, *URL_QUERY_ARGUMENT_PARSERS}
        raise UnknownOption("a Redis URL", named.group(1) if named else str(exc), known) from None
    return client


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
    return RedisCluster(startup_nodes=nodes, decode_responses=decode, **kwargs)


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


@contextlib.asynccontextmanager
async def translated(what: str) -> AsyncIterator[None]:
    """Turn redis-py's exceptions into this library's, naming what was being done."""
    try:
        yield
    except (rx.ConnectionError, rx.TimeoutError, rx.ClusterDownError, rx.TryAgainError) as exc:
        raise BrokerUnavailable(f"Redis is unreachable while trying to {what}: {exc}") from exc
    except rx.ResponseError as exc:
        raise refusal(what, exc) from exc
    except rx.RedisClusterException as exc:
        raise BrokerUnavailable(f"the Redis cluster could not {what}: {exc}") from exc
    except rx.RedisError as exc:
        raise BrokerRejected(f"Redis failed to {what}: {exc}") from exc


_PASSING = ("READONLY", "MASTERDOWN", "NOREPLICAS", "BUSY ", "LOADING", "TRYAGAIN")
"""Refusals that say the server cannot take writes for now, not that the request is wrong."""


def refusal(what: str, exc: rx.ResponseError) -> BrokerRejected | BrokerUnavailable:
    """What a Redis error reply means to the worker: a refusal, or an outage to ride out.

    A server that became a replica in a failover answers writes with
    READONLY until the URL points at the new primary; one that lost its
    primary, or its replicas, says so too. None of that is the request's
    fault, and none of it wrote anything, so the caller waits and tries
    again rather than failing jobs.
    """
    text = str(exc)
    if isinstance(exc, rx.ReadOnlyError) or text.startswith(_PASSING):
        hint = (
            "; this server is a read-only replica now (a failover?): point the URL at the primary"
            if isinstance(exc, rx.ReadOnlyError) or text.startswith("READONLY")
            else ""
        )
        return BrokerUnavailable(f"Redis cannot {what} for now: {exc}{hint}")
    return BrokerRejected(f"Redis refused to {what}: {exc}")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What the server says about how safely it keeps our keys (for `doctor`)."""

    maxmemory_policy: str | None
    """None when the server refuses CONFIG GET (managed Redis often does)."""
    appendonly: bool | None
    appendfsync: str | None
    save: str | None
    warnings: list[str] = field(default_factory=list)
    role: str | None = None
    """`primary` or `replica` (Redis says `master` and `slave`); None if INFO was refused."""
    connected_replicas: int | None = None
    """How many replicas a primary has connected right now."""
    primary: str | None = None
    """For a replica, the primary it follows (`host:port`)."""
    notes: list[str] = field(default_factory=list)
    """Facts worth showing that are not warnings (the replication role)."""

    @property
    def persists(self) -> bool | None:
        """Whether a restart would keep the data (AOF or RDB snapshots); None if unknown."""
        if self.appendonly is None and self.save is None:
            return None
        return bool(self.appendonly) or bool(self.save)


def _first(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if isinstance(value, dict):  # a cluster answers per node
        value = next(iter(value.values()), None)
    return None if value is None else str(value)


async def diagnose(client: Client, *, wait_replicas: int = 0) -> Diagnosis:
    """Read maxmemory-policy, persistence and replication; warn about each unsafe setting.

    `wait_replicas` is how many replicas this driver waits for after each
    push; more than the primary has connected is a warning.
    """
    config: dict[str, Any] = {}
    for key in ("maxmemory-policy", "appendonly", "appendfsync", "save"):
        try:
            answer = await client.config_get(key)
        except rx.ResponseError:
            continue
        except (rx.ConnectionError, rx.TimeoutError) as exc:
            raise BrokerUnavailable(
                f"Redis is unreachable while reading its config: {exc}"
            ) from exc
        config.update({str(k): v for k, v in dict(answer).items()})
    policy = _first(config, "maxmemory-policy")
    aof = _first(config, "appendonly")
    save = _first(config, "save")
    role, replicas, primary = await _replication(client)
    diagnosis = Diagnosis(
        maxmemory_policy=policy,
        appendonly=None if aof is None else aof == "yes",
        appendfsync=_first(config, "appendfsync"),
        save=save,
        role=role,
        connected_replicas=replicas,
        primary=primary,
    )
    if policy is None:
        diagnosis.warnings.append(
            "could not read maxmemory-policy (CONFIG GET refused); make sure it is noeviction"
        )
    elif policy != "noeviction":
        diagnosis.warnings.append(
            f"maxmemory-policy is {policy}: under memory pressure Redis may silently evict "
            "queued jobs; set it to noeviction"
        )
    if diagnosis.persists is False:
        diagnosis.warnings.append(
            "Redis keeps nothing on disk (no AOF, no RDB snapshots): a restart loses every "
            "queued job"
        )
    elif diagnosis.appendonly is False:
        diagnosis.warnings.append(
            f"Redis keeps only RDB snapshots (save {diagnosis.save!r}), no AOF: a crash loses "
            "every job accepted since the last snapshot; turn on appendonly"
        )
    elif diagnosis.appendonly and diagnosis.appendfsync != "always":
        diagnosis.warnings.append(
            f"appendfsync is {diagnosis.appendfsync}: jobs accepted in the last second or so "
            "can be lost on a crash"
        )
    _judge_replication(diagnosis, wait_replicas)
    return diagnosis


async def _replication(client: Client) -> tuple[str | None, int | None, str | None]:
    """The role, connected replicas and followed primary from `INFO replication`."""
    try:
        info = dict(await client.info("replication"))
    except rx.ResponseError:
        return None, None, None
    except (rx.ConnectionError, rx.TimeoutError) as exc:
        raise BrokerUnavailable(f"Redis is unreachable while reading INFO: {exc}") from exc
    if "role" not in info:  # a cluster answers per node; each queue has its own primary
        return None, None, None
    role = {"master": "primary", "slave": "replica"}.get(str(info["role"]), str(info["role"]))
    if role == "replica":
        primary = f"{info.get('master_host')}:{info.get('master_port')}"
        return role, None, primary
    return role, int(info.get("connected_slaves", 0)), None


def _judge_replication(diagnosis: Diagnosis, wait_replicas: int) -> None:
    replicas = diagnosis.connected_replicas
    if diagnosis.role == "replica":
        diagnosis.notes.append(f"replication: a replica of {diagnosis.primary}")
        diagnosis.warnings.append(
            f"this Redis is a read-only replica of {diagnosis.primary}: pushes and reserves "
            "are refused; point the connection at the primary"
        )
    elif diagnosis.role == "primary":
        diagnosis.notes.append(f"replication: a primary with {replicas} connected replica(s)")
    if wait_replicas:
        diagnosis.notes.append(f"each push waits for {wait_replicas} replica(s) (wait_replicas)")
    if wait_replicas and diagnosis.role is None:
        diagnosis.warnings.append(
            f"wait_replicas is {wait_replicas} but INFO replication could not be read, so "
            "whether that many replicas are connected is unknown"
        )
    elif wait_replicas and replicas is not None and replicas < wait_replicas:
        diagnosis.warnings.append(
            f"wait_replicas is {wait_replicas} but the primary has {replicas} connected "
            "replica(s): every push will wait out wait_timeout and raise NotReplicated"
        )
    if diagnosis.role == "primary" and replicas and diagnosis.persists is False:
        diagnosis.warnings.append(
            f"this primary keeps nothing on disk and has {replicas} replica(s): if it restarts "
            "empty before a replica is promoted, the replicas copy its empty dataset and "
            "every queued job is gone from all of them; promote a replica instead of "
            "restarting it, or turn persistence on"
        )
    elif diagnosis.role == "primary" and replicas and not wait_replicas:
        diagnosis.notes.append(
            "replication is asynchronous: a failover can drop pushes the primary had not "
            "shipped yet; `wait_replicas=1` makes each push wait for a replica"
        )


__all__ = [
    "Client",
    "Diagnosis",
    "Ready",
    "connect",
    "diagnose",
    "split_options",
    "translated",
]
