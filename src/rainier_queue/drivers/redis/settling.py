# SPDX-License-Identifier: MIT
"""How `RedisQueue` settles a delivery: acknowledge, release, renew, each one fenced script.

Why a part of its own: every settle begins with the same check (the
reservation's token must still be the one in the leases hash, or nothing is
written and the caller gets `LeaseLost`), and the acknowledgements of a
batch go out one script per queue, concurrently. Failing a job is the
failed store's (`failed.py`), since it writes the failed list.

Acknowledging a job that holds an ordering key also lets the next of its
key go, in the same script (`ordered_scripts.ACKNOWLEDGE`); a batch with no
keyed job runs `scripts.ACKNOWLEDGE`, unchanged. A job that left its line
is a job ready to run, so idle workers are woken for it. A release keeps
the key: the job goes back (to the stream, or the delayed set for its
backoff) still holding it, so the key's later jobs stay behind it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta

from ..._clock import utcnow
from ...queue import Reservation
from . import ordered_scripts, scripts
from .connection import Calls
from .keys import GROUP, Keys
from .ordering import LET_GO, ordering_key, settle_args
from .reserving import ack_args, lost
from .wakeups import wake_apart


class RedisSettler:
    """The settle side of one `RedisQueue`."""

    def __init__(self, calls: Calls, keys: Keys, *, consumer: str) -> None:
        self._calls = calls
        self.keys = keys
        self.consumer = consumer

    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        by_queue: dict[str, list[int]] = defaultdict(list)
        for i, reservation in enumerate(reservations):
            by_queue[reservation.job.queue].append(i)
        results: list[Exception | None] = [None] * len(reservations)
        let_go = False

        async def settle(queue: str, indexes: list[int]) -> None:
            nonlocal let_go
            keys = self.keys.queue(queue)
            try:
                if any(ordering_key(reservations[i].job) is not None for i in indexes):
                    done = await self._calls.run(
                        ordered_scripts.ACKNOWLEDGE,
                        keys.ordered_acknowledge_keys,
                        [GROUP, *settle_args(reservations, indexes)],
                        "acknowledge jobs",
                    )
                    let_go = let_go or LET_GO in done
                else:
                    done = await self._calls.run(
                        scripts.ACKNOWLEDGE,
                        [keys.stream, keys.leases, keys.deliveries],
                        ack_args(reservations, indexes),
                        "acknowledge jobs",
                    )
            except Exception as exc:
                for i in indexes:
                    results[i] = exc
                return
            for i, ok in zip(indexes, done, strict=True):
                results[i] = None if ok else lost(reservations[i])

        await asyncio.gather(*(settle(q, ix) for q, ix in by_queue.items()))
        if let_go:
            await wake_apart(await self._calls.ready(), self.keys.wake, 1)
        return results

    async def release(
        self, reservation: Reservation, *, delay: timedelta, count_attempt: bool
    ) -> None:
        job = reservation.job
        attempts = job.attempts if count_attempt else max(0, job.attempts - 1)
        now = utcnow()
        again = job.with_changes(attempts=attempts, available_at=now + delay)
        keys = self.keys.queue(job.queue)
        due = max(1, round(delay.total_seconds() * 1000)) if delay > timedelta(0) else 0
        ok = await self._calls.run(
            scripts.RELEASE,
            [keys.stream, keys.delayed, keys.leases, keys.deliveries],
            [GROUP, str(reservation.handle), reservation.token, again.to_json(), due],
            f"release job {job.id}",
        )
        if not ok:
            raise lost(reservation)
        if not due:
            await wake_apart(await self._calls.ready(), self.keys.wake, 1)

    async def renew(self, reservation: Reservation) -> None:
        keys = self.keys.queue(reservation.job.queue)
        ok = await self._calls.run(
            scripts.RENEW,
            [keys.stream, keys.leases],
            [GROUP, self.consumer, str(reservation.handle), reservation.token],
            f"renew the lease of job {reservation.job.id}",
        )
        if not ok:
            raise lost(reservation)


__all__ = ["RedisSettler"]
