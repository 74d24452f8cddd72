# SPDX-License-Identifier: MIT
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis.asyncio as aioredis

from ..foreign.planting import envelope_bodies
from ..redis_servers import RedisServers, delete_keys, with_tls
from ..services import require_port
from ..tls_certs import Certs
from .backends import SECRET, TLS, Backend, Cut, Listen, closed_port
from .raw_storage import redis_raw

REDIS_URL = "redis://127.0.0.1:6379/0"

PERSISTENT = ("--appendonly", "yes", "--appendfsync", "always")
"""A private server keeps every write in its append-only file, so a restart loses nothing.
Later arguments win in redis-server, so these override RedisServers.start's defaults."""


def url(tmp: Path, namespace: str) -> str:
    return f"{REDIS_URL}?prefix=rq:{namespace}:"


def check() -> None:
    require_port("Redis", 6379)


async def cleanup(tmp: Path, namespace: str) -> None:
    await delete_keys(f"rq:{namespace}:*", REDIS_URL)


def stream_key(prefix: str, queue: str) -> str:
    """A queue's stream, as docs/drivers/redis.md names it: `{prefix}{<queue>}:stream`."""
    return f"{prefix}{{{quote(queue, safe='')}}}:stream"


async def _add(tmp: Path, namespace: str, queue: str, entries: Sequence[tuple[str, Any]]) -> None:
    """`XADD` each body to the queue's stream, as a producer in another language would."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        for _, body in entries:
            await client.xadd(stream_key(f"rq:{namespace}:", queue), {"body": body})
    finally:
        await client.aclose()


class _Private:
    outage = "Redis is unreachable"

    def __init__(self, listen: Listen | None) -> None:
        self.servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-redis-")))
        self.host = "127.0.0.1"
        self.arguments: tuple[str, ...] = PERSISTENT
        if listen is not None:
            self.host = listen.host
            self.arguments += ("--bind", f"127.0.0.1 {listen.host}", "--protected-mode", "no")
        try:
            self.port = self.servers.start(*self.arguments)
        except BaseException:
            self.servers.stop()
            raise

    def url(self, tmp: Path, namespace: str) -> str:
        return f"redis://{self.host}:{self.port}/0?prefix=rq:{namespace}:"

    def crash(self) -> None:
        self.servers.kill(self.port)

    def stop(self) -> None:
        self.servers.stop_one(self.port)

    def start(self) -> None:
        self.servers.start(*self.arguments, port=self.port)  # same directory: the AOF reloads

    def remove(self) -> None:
        self.servers.stop()


class _TLSServer:
    """A private redis-server that speaks TLS alone (`rediss://`)."""

    def __init__(self, certs: Certs, folder: Path) -> None:
        self.servers, self.port = with_tls(certs.cert, certs.key, certs.ca)

    def url(self, host: str, namespace: str, query: str) -> str:
        return f"rediss://{host}:{self.port}/0?prefix=rq:{namespace}:&{query}"

    def stop(self) -> None:
        self.servers.stop()


TLS_RULES = TLS(
    server=_TLSServer,
    trusting=lambda ca: f"ssl_ca_certs={ca}",
    checked="",  # `rediss://` asks for TLS, checked against the system's authorities
    insecure="insecure_skip_verify=true&ssl_cert_reqs=none",
    weakenings=("ssl_cert_reqs=none", "ssl_check_hostname=false"),
    plain_url=lambda ns: f"rediss://127.0.0.1:6379/0?prefix=rq:{ns}:",
)

BACKEND = Backend(
    name="redis",
    url=url,
    check=check,
    cleanup=cleanup,
    secret_url=lambda tmp, ns: f"redis://app:{SECRET}@127.0.0.1:6379/0?prefix=rq:{ns}:",
    unreachable_url=lambda tmp, ns: f"redis://127.0.0.1:{closed_port()}/0?prefix=rq:{ns}:",
    cut=Cut(
        6379, lambda tmp, ns, port: f"redis://127.0.0.1:{port}/0?prefix=rq:{ns}:", [(1, b"EVALSHA")]
    ),
    private_server=lambda folder, listen: _Private(listen),
    raw=redis_raw,
    plant=envelope_bodies(_add),
    tls=TLS_RULES,
    lacks={
        "ordering_across_queues": (
            "a key's line is kept beside its queue's stream, in the queue's hash slot, so one"
            " script moves it with the settle: the same key on two queues is two lines"
            " (docs/flow-control.md)"
        ),
    },
    known_failures={
        "test_tls_asked_of_a_server_that_speaks_none_is_refused_not_used_in_the_clear": (
            "a redis-server without TLS never answers the handshake, which redis-py reports"
            " as a connect timeout: BrokerUnavailable, an outage, not TLSVerificationError"
        ),
    },
)
