# SPDX-License-Identifier: MIT
"""NATS's key-value bucket as a store (`drivers/nats/kvcache.py`): no lock store a user names
(`open_cache` has no `nats` scheme), but the store NATS counts batches in, so the contract
runs on it. The URL's prefix names the bucket, `<prefix>-batches`, as the queue's does."""

from __future__ import annotations

import contextlib
from pathlib import Path

import nats
import nats.js.errors

from rainier_queue.cache import Cache
from rainier_queue.drivers.cached_batches import KEPT
from rainier_queue.drivers.nats.connection import NATSConnection
from rainier_queue.drivers.nats.kvcache import KeyValueCache
from rainier_queue.drivers.nats.settings import NATSSettings

from ..services import require_port
from .stores import Store

SERVER = "nats://127.0.0.1:4222"


class _Owned(KeyValueCache):
    """The bucket with a connection of its own, closed with it."""

    def __init__(self, connection: NATSConnection, settings: NATSSettings) -> None:
        super().__init__(connection, settings, f"{settings.prefix}-batches", KEPT)
        self._own = connection

    async def aclose(self) -> None:
        await self._own.aclose()


def _open(url: str) -> Cache:
    settings, _ = NATSSettings.read(url, {}, who="the NATS store")
    return _Owned(NATSConnection(settings), settings)


def check() -> None:
    require_port("NATS", 4222)


async def cleanup(tmp: Path, namespace: str) -> None:
    client = await nats.connect(SERVER)
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await client.jetstream().delete_stream(f"KV_{namespace}-batches")
    finally:
        await client.close()


STORE = Store("nats", lambda tmp, ns: f"{SERVER}/?prefix={ns}", check, cleanup, opener=_open)
