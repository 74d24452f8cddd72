# SPDX-License-Identifier: MIT
"""What `doctor` reads from Redis: the settings that decide whether accepted jobs survive.

Redis can lose a job it accepted in ways nobody is told about: an evicting
`maxmemory-policy` deletes queues under memory pressure, and persistence
and replication decide what a crash or a failover keeps. Each of those is
a setting the server will report, so `doctor` reads them and warns about
every unsafe one.

On a cluster each primary holds the queues of its own slots and has
settings of its own: one node with `allkeys-lru` loses that node's jobs
while the others are fine. So every primary is read, and a warning names
the primaries it is about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis import exceptions as rx
from redis.asyncio.cluster import ClusterNode, RedisCluster

from ...errors import BrokerUnavailable
from .connection import Client

_T = TypeVar("_T")

SETTINGS = ("maxmemory-policy", "appendonly", "appendfsync", "save")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What the server says about how safely it keeps our keys (for `doctor`).

    On a cluster, `nodes` holds each primary's own diagnosis, by `host:port`;
    the settings here are the ones every primary shares (None where they
    differ), and each warning names the primaries it is about.
    """

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
    nodes: dict[str, Diagnosis] = field(default_factory=dict)
    """On a cluster, each primary's diagnosis by `host:port`; empty on a single server."""

    @property
    def persists(self) -> bool | None:
        """Whether a restart would keep the data (AOF or RDB snapshots); None if unknown."""
        if self.appendonly is None and self.save is None:
            return None
        return bool(self.appendonly) or bool(self.save)


async def diagnose(client: Client, *, wait_replicas: int = 0) -> Diagnosis:
    """Read maxmemory-policy, persistence and replication; warn about each unsafe setting.

    `wait_replicas` is how many replicas this driver waits for after each
    push; more than the primary has connected is a warning. On a cluster
    every primary is read.
    """
    if isinstance(client, RedisCluster):
        return await _cluster(client, wait_replicas)
    return await _server(client, {}, wait_replicas)


async def _server(client: Client, target: Mapping[str, Any], wait_replicas: int) -> Diagnosis:
    """One server's diagnosis; `target` picks a cluster node (`target_nodes`)."""
    config: dict[str, Any] = {}
    for key in SETTINGS:
        try:
            answer = await client.config_get(key, **target)
        except rx.ResponseError:
            continue
        except (rx.ConnectionError, rx.TimeoutError) as exc:
            raise BrokerUnavailable(
                f"Redis is unreachable while reading its config: {exc}"
            ) from exc
        config.update({str(k): v for k, v in dict(answer).items()})
    aof = _text(config, "appendonly")
    role, replicas, primary = await _replication(client, target)
    diagnosis = Diagnosis(
        maxmemory_policy=_text(config, "maxmemory-policy"),
        appendonly=None if aof is None else aof == "yes",
        appendfsync=_text(config, "appendfsync"),
        save=_text(config, "save"),
        role=role,
        connected_replicas=replicas,
        primary=primary,
    )
    diagnosis.warnings.extend(_settings_warnings(diagnosis))
    _judge_replication(diagnosis, wait_replicas)
    return diagnosis


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    return None if value is None else str(value)


def _settings_warnings(diagnosis: Diagnosis) -> list[str]:
    warnings: list[str] = []
    policy = diagnosis.maxmemory_policy
    if policy is None:
        warnings.append(
            "could not read maxmemory-policy (CONFIG GET refused); make sure it is noeviction"
        )
    elif policy != "noeviction":
        warnings.append(
            f"maxmemory-policy is {policy}: under memory pressure Redis may silently evict "
            "queued jobs; set it to noeviction"
        )
    if diagnosis.persists is False:
        warnings.append(
            "Redis keeps nothing on disk (no AOF, no RDB snapshots): a restart loses every "
            "queued job"
        )
    elif diagnosis.appendonly is False:
        warnings.append(
            f"Redis keeps only RDB snapshots (save {diagnosis.save!r}), no AOF: a crash loses "
            "every job accepted since the last snapshot; turn on appendonly"
        )
    elif diagnosis.appendonly and diagnosis.appendfsync != "always":
        warnings.append(
            f"appendfsync is {diagnosis.appendfsync}: jobs accepted in the last second or so "
            "can be lost on a crash"
        )
    return warnings


async def _replication(
    client: Client, target: Mapping[str, Any]
) -> tuple[str | None, int | None, str | None]:
    """The role, connected replicas and followed primary from `INFO replication`."""
    try:
        info = dict(await client.info("replication", **target))
    except rx.ResponseError:
        return None, None, None
    except (rx.ConnectionError, rx.TimeoutError) as exc:
        raise BrokerUnavailable(f"Redis is unreachable while reading INFO: {exc}") from exc
    if "role" not in info:
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


async def _cluster(client: RedisCluster, wait_replicas: int) -> Diagnosis:
    """Every primary read on its own; their warnings merged, each naming its primaries."""
    primaries = sorted(client.get_primaries(), key=lambda node: node.name)
    found = await asyncio.gather(*(_node(client, node, wait_replicas) for node in primaries))
    nodes = {node.name: d for node, d in zip(primaries, found, strict=True) if d is not None}
    read = list(nodes.values())
    merged = Diagnosis(
        maxmemory_policy=_agreed(d.maxmemory_policy for d in read),
        appendonly=_agreed(d.appendonly for d in read),
        appendfsync=_agreed(d.appendfsync for d in read),
        save=_agreed(d.save for d in read),
        role=_agreed(d.role for d in read),
        connected_replicas=_agreed(d.connected_replicas for d in read),
        nodes=nodes,
    )
    names = [node.name for node in primaries]
    merged.notes.append(f"a cluster of {len(names)} primaries, each checked: {', '.join(names)}")
    by_replicas = _grouped({name: [f"{d.connected_replicas}"] for name, d in nodes.items()})
    for count, holders in by_replicas:
        verb = "have" if 1 < len(holders) < len(names) else "has"
        merged.notes.append(
            f"replication: {_label(holders, names)} {verb} {count} connected replica(s)"
        )
    for name, diagnosis in zip(names, found, strict=True):
        if diagnosis is None:
            merged.warnings.append(
                f"primary {name}: could not be read; its settings are unknown, check it yourself"
            )
    for warning, holders in _grouped({name: d.warnings for name, d in nodes.items()}):
        merged.warnings.append(f"{_label(holders, names)}: {warning}")
    return merged


async def _node(client: RedisCluster, node: ClusterNode, wait_replicas: int) -> Diagnosis | None:
    """One primary's diagnosis, or None when it cannot be reached."""
    try:
        return await _server(client, {"target_nodes": node}, wait_replicas)
    except BrokerUnavailable:
        return None


def _agreed(values: Iterable[_T]) -> _T | None:
    """The one value every primary has, or None when they differ (or none was read)."""
    distinct = list(dict.fromkeys(values))
    return distinct[0] if len(distinct) == 1 else None


def _grouped(lines: Mapping[str, Sequence[str]]) -> list[tuple[str, list[str]]]:
    """Each distinct line, in order of first sight, with the nodes that have it."""
    holders: dict[str, list[str]] = {}
    for name, texts in lines.items():
        for text in texts:
            holders.setdefault(text, []).append(name)
    return list(holders.items())


def _label(holders: Sequence[str], everyone: Sequence[str]) -> str:
    if len(everyone) > 1 and list(holders) == list(everyone):
        return f"every primary ({len(everyone)})"
    return ("primary " if len(holders) == 1 else "primaries ") + ", ".join(holders)


__all__ = ["Diagnosis", "diagnose"]
