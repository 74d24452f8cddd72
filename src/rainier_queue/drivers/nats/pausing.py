# SPDX-License-Identifier: MIT
"""Paused queues as entries of a JetStream key-value bucket, `<prefix>-paused`.

An entry per paused queue, its key the queue's subject token
(`names.token`), so any queue name makes a valid key. Workers read the
entries of the queues they serve on a cadence (`WorkerOptions.pause_check`),
a direct read each, never on the way to a job: a fetch is the same whether
anything is paused or not. The bucket is made by the first `pause`, with the
stream's storage and replicas; until then every queue reads as running, at
the cost of one "no such bucket" answer per check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import nats.js.errors as jx
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from .connection import NATSConnection, translated
from .names import Names, token

MARK = b"paused"


class NATSPauses:
    """`Pausable` for `NATSQueue`: create an entry to pause, purge it to resume."""

    def __init__(self, connection: NATSConnection, names: Names) -> None:
        self._connection = connection
        self.bucket = f"{names.prefix}-paused"
        self._kv: KeyValue | None = None

    async def _bucket(self, *, make: bool) -> KeyValue | None:
        """The bucket, made first if `make`; None when it does not exist (nothing paused)."""
        if self._kv is not None:
            return self._kv
        js = await self._connection.jetstream()
        settings = self._connection.settings
        async with translated("open the paused-queues bucket"):
            try:
                self._kv = await js.key_value(self.bucket)
            except jx.NotFoundError:
                if not make:
                    return None
                self._kv = await js.create_key_value(
                    KeyValueConfig(
                        bucket=self.bucket,
                        history=1,
                        storage=StorageType.MEMORY if settings.lossy else StorageType.FILE,
                        replicas=settings.replicas,
                    )
                )
        return self._kv

    async def pause(self, queue: str) -> bool:
        kv = await self._bucket(make=True)
        assert kv is not None
        async with translated("pause a queue"):
            try:
                await kv.create(token(queue), MARK)
            except jx.KeyWrongLastSequenceError:
                return False  # paused already
        return True

    async def resume(self, queue: str) -> bool:
        kv = await self._bucket(make=False)
        if kv is None or not await self._marked(kv, queue):
            return False
        async with translated("resume a queue"):
            await kv.purge(token(queue))
        return True

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        kv = await self._bucket(make=False)
        if kv is None:
            return frozenset()
        return frozenset([q for q in queues if await self._marked(kv, q)])

    async def _marked(self, kv: KeyValue, queue: str) -> bool:
        with contextlib.suppress(jx.NotFoundError):
            async with translated("read the paused queues"):
                await kv.get(token(queue))
            return True
        return False


__all__ = ["NATSPauses"]
