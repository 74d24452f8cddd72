# SPDX-License-Identifier: MIT
"""The cache contract on a three-node Redis cluster this test process starts."""

from __future__ import annotations

from pathlib import Path

from ..redis_servers import shared_cluster
from .stores import Store


def url(tmp: Path, namespace: str) -> str:
    seeds = ",".join(f"127.0.0.1:{port}" for port in shared_cluster().ports)
    return f"redis-cluster://{seeds}/?prefix=rq:{namespace}:"


def check() -> None:
    shared_cluster()


STORE = Store("redis-cluster", url, check)
