# SPDX-License-Identifier: MIT
"""What `RedisQueue` can tell about the server under it: settings for `doctor`, and wipes.

A Redis without persistence that restarts (or a replica promoted empty, or
a flush) loses every job silently; the queue would carry on as if nothing
happened. A marker key with a random epoch makes that loss visible, and the
server's settings (eviction, persistence, replication) go to `doctor`.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from redis import exceptions as rx

from .connection import Client, Ready, translated, transport_warnings
from .diagnosis import Diagnosis, diagnose
from .keys import Keys
from .replication import HeldWrites

log = logging.getLogger("rainier_queue.redis")

MARKER_CHECK_EVERY = 5.0
"""Seconds between checks that the dataset under us was not wiped."""


class RedisHealth:
    """`Diagnosable`, `HealthNotes` and the wipe check: a part of `RedisQueue`."""

    def __init__(
        self,
        ready: Ready,
        keys: Keys,
        *,
        url: str,
        replicated: HeldWrites | None,
        describe: Callable[[], str],
    ) -> None:
        self._ready = ready
        self.keys = keys
        self._url = url
        self._replicated = replicated
        self.describe = describe
        """What the queue is, for the error a wipe logs (the queue's `describe`)."""
        self._epoch: str | None = None
        self._checked_at = 0.0

    async def diagnose(self) -> Diagnosis:
        """maxmemory-policy, persistence and replication, with a warning for each unsafe one."""
        wait = 0 if self._replicated is None else self._replicated.durability.replicas
        return await diagnose(await self._ready(), wait_replicas=wait)

    async def health_warnings(self) -> list[str]:
        """The warnings of `diagnose`, and how jobs travel, for `rainier-queue doctor`."""
        return (await self.diagnose()).warnings + transport_warnings(self._url)

    async def health_notes(self) -> list[str]:
        """The replication role and durable-push setting, for `doctor` (`HealthNotes`)."""
        return (await self.diagnose()).notes

    async def check_dataset(self) -> bool:
        """False (and an error logged) if the Redis under us lost its data since we last looked.

        A marker key with a random epoch is set the first time; if it is gone
        later, the server restarted without persistence, failed over to an
        empty replica, or was flushed, and every job it held is gone with it.
        On a read-only replica the marker is only read: a replica that
        resynced from a primary that came back empty loses it too, and is
        reported the same way; the primary's drivers write the new one.
        """
        client = await self._ready()
        async with translated("check the dataset marker"):
            found = await cast(Awaitable[str | None], client.get(self.keys.marker))
            if found is not None and self._epoch in (None, found):
                self._epoch = found
                return True
            seen = found if found is not None else await self._new_marker(client)
        previous, self._epoch = self._epoch, seen
        if previous is None:
            return True
        log.error(
            "the Redis at %s lost its data (marker %s is %s): it restarted without "
            "persistence, failed over to an empty replica, or was flushed. Every job it held "
            "before is gone; see the `redis` driver's documentation",
            self.describe(),
            self.keys.marker,
            "gone" if found is None else "changed",
        )
        return False

    async def _new_marker(self, client: Client) -> str | None:
        """Set a fresh epoch unless one is there; the epoch now in place (None on a replica)."""
        try:
            await cast(Awaitable[Any], client.set(self.keys.marker, secrets.token_hex(8), nx=True))
        except rx.ReadOnlyError:
            return None
        return await cast(Awaitable[str | None], client.get(self.keys.marker))

    async def check_now_and_then(self) -> None:
        """`check_dataset`, at most once every `MARKER_CHECK_EVERY` seconds."""
        now = time.monotonic()
        if now - self._checked_at >= MARKER_CHECK_EVERY:
            self._checked_at = now
            await self.check_dataset()
