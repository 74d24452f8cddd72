# SPDX-License-Identifier: MIT
"""How `RedisQueue` reserves: one script per reserve, its entries read totally.

A reserve of N jobs is one script (`scripts.RESERVE`): promote the delayed
jobs that came due, reclaim entries whose lease lapsed, then read new ones,
recording a fresh token and a delivery count per entry. What it returns is
read here through `stored.read_envelope`, so an entry that is not a job
goes to the failed list (`malformed.quarantine`) and its place is reserved
again (`malformed.top_up`); nothing a foreign producer wrote stops a worker.

`RedisReserver` is the part of the queue that does it, for a plain reserve,
for a reserve sent with a batch of acknowledgements, and for the reserve an
idle worker sends behind its wait (`waiting.py`), which all read alike.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..._clock import utcnow
from ...envelope.reading import Malformed, read_envelope
from ...errors import LeaseLost
from ...queue import Reservation, new_token
from ..malformed import Pass, quarantine, top_up
from . import ordered_scripts, scripts
from .connection import Calls, translated
from .failed import RedisFailedStore
from .health import RedisHealth
from .keys import GROUP, Keys, QueueKeys
from .ordering import LET_GO, ordering_key, settle_args
from .wakeups import wake_apart

log = logging.getLogger("rainier_queue.redis")

ReserveCall = tuple[QueueKeys, list[Any], datetime]
"""The keys, the arguments and the time of one reserve (`RedisReserver.call`)."""


class RedisReserver:
    """The reserve side of one `RedisQueue`."""

    def __init__(
        self,
        calls: Calls,
        keys: Keys,
        *,
        consumer: str,
        lease: timedelta,
        failed: RedisFailedStore,
        health: RedisHealth,
        cluster: bool,
    ) -> None:
        self._calls = calls
        self.keys = keys
        self.consumer = consumer
        self._lease = lease
        self._lease_ms = max(1, int(lease.total_seconds() * 1000))
        self._failed = failed
        self.health = health
        self._cluster = cluster
        self.served: set[str] = set()
        """Queues reserved from: their groups hold a consumer of this name."""

    async def reserve(self, queue: str, limit: int) -> list[Reservation]:
        """Up to `limit` jobs of `queue`; fewer only when no more are due."""
        await self.health.check_now_and_then()
        return await self.top_up(queue, limit, await self._once(queue, limit))

    async def _once(self, queue: str, limit: int) -> Pass:
        call = self.call(queue, limit)
        keys, args, _ = call
        rows = await self._calls.run(
            scripts.RESERVE, keys.reserve_keys, args, f"reserve from {queue!r}"
        )
        return await self.read(queue, call, rows)

    async def top_up(self, queue: str, limit: int, first: Pass) -> list[Reservation]:
        """The jobs of `first`, and more for the places entries that were not jobs took."""
        return await top_up(first, limit, lambda places: self._once(queue, places))

    def call(self, queue: str, limit: int) -> ReserveCall:
        """The keys, the arguments and the time of one reserve.

        The last argument is a fresh token: the script gives the i-th job it
        reserves the token `{that}.{i}` (`tokens_for`), so one argument, not
        one per job, travels with each reserve.
        """
        self.served.add(queue)
        return (
            self.keys.queue(queue),
            [GROUP, self.consumer, self._lease_ms, limit, new_token()],
            utcnow(),
        )

    async def read(
        self, queue: str, call: ReserveCall, rows: Any, now: datetime | None = None
    ) -> Pass:
        """The reserved entries as reservations, and how many were not jobs (failed here).

        `now` is when the script ran, where that is known better than the call's time.
        """
        keys, args, called = call
        tokens = tokens_for(args[4], len(rows))
        until = (called if now is None else now) + self._lease
        out: list[Reservation] = []
        malformed = 0
        for i, (entry_id, body, deliveries) in enumerate(rows):
            # The stream it came from is its queue, whatever a foreign producer wrote.
            job = read_envelope(body, queue=queue, delivered=int(deliveries))
            if isinstance(job, Malformed):
                await self._fail_foreign(keys, queue, str(entry_id), tokens[i], job)
                malformed += 1
                continue
            out.append(
                Reservation(
                    job=job, token=tokens[i], lease_until=until, lease=self._lease, handle=entry_id
                )
            )
        return out, malformed

    async def _fail_foreign(
        self, keys: QueueKeys, queue: str, entry_id: str, token: str, malformed: Malformed
    ) -> None:
        """A stream entry that is not our envelope: never crash, keep it where it can be seen."""
        job = malformed.as_job(queue=queue, job_id=f"raw-{entry_id}")
        record = self._failed.record(keys, job, entry_id, token, malformed.error)
        entry = f"queue {queue!r}: stream entry {entry_id}"
        await quarantine(log, entry, malformed, "the failed list", record)

    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]] | None:
        """One round trip, and both happen or neither does; None where that cannot be.

        Acknowledgements from the queue being reserved from (a worker's usual
        case) go with the reserve in one script, which works on a cluster too
        (one queue, one slot). Others need a MULTI/EXEC over both scripts,
        which a cluster cannot run across slots, so there the caller sends
        them apart.
        """
        if all(r.job.queue == queue for r in reservations):
            return await self._acknowledge_and_reserve_one_queue(reservations, queue, limit)
        if self._cluster:
            return None
        await self.health.check_now_and_then()
        by_queue: dict[str, list[int]] = defaultdict(list)
        for i, reservation in enumerate(reservations):
            by_queue[reservation.job.queue].append(i)
        client = await self._calls.ready()
        pipe = client.pipeline(transaction=True)
        for name, indexes in by_queue.items():
            ack_keys = self.keys.queue(name)
            if any(ordering_key(reservations[i].job) is not None for i in indexes):
                named = ack_keys.ordered_acknowledge_keys
                sent = [GROUP, *settle_args(reservations, indexes)]
                pipe.eval(ordered_scripts.ACKNOWLEDGE, len(named), *named, *sent)
            else:
                pipe.eval(
                    scripts.ACKNOWLEDGE,
                    3,
                    ack_keys.stream,
                    ack_keys.leases,
                    ack_keys.deliveries,
                    *ack_args(reservations, indexes),
                )
        call = self.call(queue, limit)
        keys, args, _ = call
        pipe.eval(scripts.RESERVE, len(keys.reserve_keys), *keys.reserve_keys, *args)
        async with translated(f"acknowledge jobs and reserve from {queue!r}"):
            answers = await pipe.execute()
        outcomes: list[Exception | None] = [None] * len(reservations)
        let_go = False
        for indexes, done in zip(by_queue.values(), answers, strict=False):
            let_go = let_go or LET_GO in done
            for i, ok in zip(indexes, done, strict=True):
                outcomes[i] = None if ok else lost(reservations[i])
        if let_go:
            await wake_apart(client, self.keys.wake, 1)
        first = await self.read(queue, call, answers[-1])
        return outcomes, await self.top_up(queue, limit, first)

    async def _acknowledge_and_reserve_one_queue(
        self, reservations: Sequence[Reservation], queue: str, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        await self.health.check_now_and_then()
        call = self.call(queue, limit)
        keys, args, _ = call
        sent = [*args[:4], len(reservations), args[4]]
        if any(ordering_key(reservation.job) is not None for reservation in reservations):
            sent += settle_args(reservations, range(len(reservations)))
            acked, rows = await self._calls.run(
                ordered_scripts.ACKNOWLEDGE_AND_RESERVE,
                [*keys.reserve_keys, *keys.ordered_keys[:3]],
                sent,
                f"acknowledge jobs and reserve from {queue!r}",
            )
            if LET_GO in acked:  # a job left its key's line: for another worker, if not ours
                await wake_apart(await self._calls.ready(), self.keys.wake, 1)
        else:
            for reservation in reservations:
                sent += [str(reservation.handle), reservation.token]
            acked, rows = await self._calls.run(
                scripts.ACKNOWLEDGE_AND_RESERVE,
                keys.reserve_keys,
                sent,
                f"acknowledge jobs and reserve from {queue!r}",
            )
        outcomes: list[Exception | None] = [
            None if ok else lost(reservation)
            for reservation, ok in zip(reservations, acked, strict=True)
        ]
        first = await self.read(queue, call, rows)
        return outcomes, await self.top_up(queue, limit, first)


def ack_args(reservations: Sequence[Reservation], indexes: list[int]) -> list[Any]:
    """The acknowledge script's arguments for the reservations at `indexes`."""
    args: list[Any] = [GROUP]
    for i in indexes:
        args += [str(reservations[i].handle), reservations[i].token]
    return args


def lost(reservation: Reservation) -> LeaseLost:
    """The error of a settle whose reservation is no longer this worker's."""
    return LeaseLost(
        f"job {reservation.job.id} is no longer reserved by this worker "
        "(its lease lapsed or it was settled already)"
    )


def tokens_for(nonce: str, count: int) -> list[str]:
    """The tokens a reserve script gave its `count` jobs: `{nonce}.1`, `{nonce}.2`, ..."""
    return [f"{nonce}.{i}" for i in range(1, count + 1)]


__all__ = ["RedisReserver", "ReserveCall", "ack_args", "lost", "tokens_for"]
