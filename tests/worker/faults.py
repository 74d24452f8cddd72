# SPDX-License-Identifier: MIT
"""Fault injectors: a real `MemoryQueue` whose broker calls fail when a test says so.

These are not mocks of a driver: every call that is let through is the
memory driver's own, leases and tokens included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from typing_extensions import override

from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import BrokerUnavailable
from rainier_queue.queue import DEFAULT_LEASE, Reservation


class Outage(MemoryQueue):
    """Reserve fails as scripted: `script` says, call by call, whether it fails (True)."""

    def __init__(self, script: Iterable[bool], *, lease: timedelta = DEFAULT_LEASE) -> None:
        super().__init__(lease=lease)
        self._script = iter(script)
        self.reserve_calls = 0

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        self.reserve_calls += 1
        if next(self._script, False):
            raise BrokerUnavailable("the broker is down (injected)")
        return await super().reserve(queue, limit=limit)


class AckOutage(MemoryQueue):
    """The first `failures` acknowledgements fail as if the broker were down."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise BrokerUnavailable("the broker is down (injected)")
        await super().acknowledge(reservation)


class RenewOutage(MemoryQueue):
    """Renewals fail while `down` is true, so a running job's lease lapses."""

    def __init__(self, *, lease: timedelta) -> None:
        super().__init__(lease=lease)
        self.down = False
        self.renewals = 0

    @override
    async def renew(self, reservation: Reservation) -> None:
        if self.down:
            raise BrokerUnavailable("the broker is down (injected)")
        self.renewals += 1
        await super().renew(reservation)


def failing_for_ever() -> Iterable[bool]:
    while True:
        yield True


class WaitOutage(MemoryQueue):
    """The first `failures` waits for work fail as if the broker were down."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise BrokerUnavailable("the broker is down (injected)")
        await super().wait_for_work(queues, timeout)
