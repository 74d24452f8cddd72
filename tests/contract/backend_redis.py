# SPDX-License-Identifier: MIT
from __future__ import annotations

import tempfile
from pathlib import Path

from ..redis_servers import RedisServers, delete_keys
from ..services import require_port
from .backends import SECRET, Backend, Cut, Listen, closed_port

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
)
