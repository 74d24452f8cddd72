# SPDX-License-Identifier: MIT
"""`RedisQueue`: the Queue port on Redis streams (see the package docstring for the costs)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from redis.asyncio import Redis
from typing_extensions import override

from ..._clock import utcnow
from ...durations import parse_duration
from ...envelope import QueuedJob, format_time
from ...envelope.reading import Malformed, read_envelope
from ...errors import ConfigurationError, LeaseLost
from ...flags import parse_flag
from ...queue import DEFAULT_LEASE, Capabilities, QueueCounts, Reservation, new_token
from ...redact import redact_url
from . import scripts
from .cluster_writes import ClusterWrites
from .connection import (
    Client,
    Ready,
    connect,
    split_options,
    translated,
)
from .failed import RedisFailedJobs
from .health import RedisHealth
from .kept import KeptConnection
from .keys import DEFAULT_PREFIX, GROUP, Keys, QueueKeys, check_prefix
from .replication import OPTIONS as DURABILITY_OPTIONS
from .replication import Durability, HeldWrites, ReplicatedWrites, durability_from, raise_first
from .waiting import RedisWaits
from .wakeups import WAKE_TOKENS, wake_apart, wake_commands

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

    from .. import DriverContext

MAX_RESERVE_PASSES = 100
"""How many reserves one call makes at most while it keeps meeting entries that are not jobs."""

log = logging.getLogger("rainier_queue.redis")

CONSUMER_IDLE_LIMIT = timedelta(hours=1)
"""A stopping worker also removes other consumers idle this long that hold nothing."""


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _delay_ms(job: QueuedJob, now: datetime) -> int:
    """A delay, not a moment (the push script adds it to the server's clock); 0: due now."""
    return max(1, _ms(job.available_at) - _ms(now)) if job.available_at > now else 0


def _consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class RedisQueue(RedisFailedJobs, RedisHealth, RedisWaits):
    """Redis streams with a consumer group, delayed jobs in a sorted set, Lua-fenced settles."""

    name: ClassVar[str] = "redis"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        may_lose_accepted_job=True,
        raw_push=True,
        due_on_server_clock=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"prefix", "lease", "cluster", "consumer", *DURABILITY_OPTIONS}
    )

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`redis://host:6379/0?prefix=app:`, `rediss://`, `unix:///path`, `redis-cluster://h:p,h:p`."""
        bare, from_url = split_options(url, cls.OPTIONS)
        settings: dict[str, Any] = {**from_url, **options}
        lease = settings.get("lease")
        cluster = parse_flag(settings.get("cluster", False), setting="cluster")
        cluster = cluster or url.lower().startswith("redis-cluster:")
        try:
            prefix = check_prefix(str(settings.get("prefix", DEFAULT_PREFIX)))
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        return cls(
            connect(bare, cluster=cluster, decode=True, ours=cls.OPTIONS),
            prefix=prefix,
            lease=parse_duration(lease, setting="lease") if lease is not None else DEFAULT_LEASE,
            consumer=settings.get("consumer"),
            url=url,
            cluster=cluster,
            durability=durability_from(settings),
        )

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        lease: timedelta = DEFAULT_LEASE,
        consumer: str | None = None,
        url: str = "redis://",
        cluster: bool = False,
        durability: Durability | None = None,
    ) -> None:
        if lease <= timedelta(0):
            raise ConfigurationError(f"`lease` must be longer than zero (got {lease})")
        self._client = client
        self._ready = Ready(client)
        self.keys = Keys(check_prefix(prefix))
        self._lease = lease
        self.consumer = consumer or _consumer_name()
        self._url = url
        self.cluster = cluster or not isinstance(client, Redis)
        self._scripts: dict[str, AsyncScript] = {}
        self._epoch: str | None = None
        self._blocking: asyncio.Task[None] | None = None
        self._read_timeout: float | None = None
        self._kept = KeptConnection()
        self._checked_at = 0.0
        # Every push holds its connection for the answer (on a cluster, one of the
        # node owning its slot), so a push whose answer was lost is OutcomeUnknown,
        # never resent, and not an outage to retry; in the durable mode it also
        # waits there for the replicas of the primary that took it.
        self._pushes: HeldWrites = (
            ReplicatedWrites(client, durability or Durability(0))
            if isinstance(client, Redis)
            else ClusterWrites(client, durability)
        )
        self._replicated = None if durability is None else self._pushes
        """The pushes, when they wait for replicas."""
        self._served: set[str] = set()
        """Queues this object reserved from: their groups hold a consumer of its name."""

    @property
    @override
    def lease(self) -> timedelta:
        return self._lease

    @property
    def client(self) -> Client:
        """The redis-py client underneath, for tests and diagnostics."""
        return self._client

    @override
    def describe(self) -> str:
        kind = "redis-cluster" if self.cluster else "redis"
        durable = "" if self._replicated is None else f" {self._replicated.durability.describe()}"
        # The prefix in force, whether from the URL or an option, so not the URL's query too.
        base = redact_url(self._url.split("?", 1)[0])
        return f"{kind} {base} prefix={self.keys.prefix!r}{durable}"

    def _script(self, source: str) -> AsyncScript:
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._client.register_script(source)
        return script

    async def _run(self, source: str, keys: Sequence[str], args: Sequence[Any], what: str) -> Any:
        await self._ready()
        async with translated(what):
            return await self._script(source)(keys=list(keys), args=list(args))

    # -- pushing -----------------------------------------------------------------

    @override
    async def push(self, job: QueuedJob) -> str:
        """One job, off-cluster.

        Due now, it is an `XADD` and the wake-up, sent as plain commands in one
        round trip, not as the push script: on a server that was idle (a
        lone job pushed to an idle worker, whose wait for it this is) the
        script took about 45 µs of Redis's time and the three commands take
        about 20 (`INFO commandstats`, 50 pushes a second). The entry is
        written before the wake-up, so a woken worker finds it. Another
        client's command may now come between the two; at worst a worker
        takes the job first and the wake-up then wakes one that finds
        nothing, as a stale wake-up token does. Delayed, it is `push_many`'s
        script, which reads the server's clock.
        """
        if self.cluster:
            await self.push_many([job])
            return job.id
        keys = self.keys.queue(job.queue)
        delay = _delay_ms(job, utcnow())
        if not delay:
            sent = [
                ("XADD", keys.stream, "*", "body", job.to_json()),
                *wake_commands(self.keys.wake, 1),
            ]
            await self._pushes.commands(sent, what="push jobs", job_ids=[job.id])
            return job.id
        args = [1, WAKE_TOKENS, delay, job.to_json()]
        names = [keys.stream, keys.delayed, self.keys.wake]
        script = self._script(scripts.PUSH)
        await self._pushes.script(script, names, args, what="push jobs", job_ids=[job.id])
        return job.id

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """One script per queue (each one slot); off-cluster the wake-up rides along."""
        if not jobs:
            return []
        await self._ready()
        now = utcnow()
        by_queue: dict[str, list[Any]] = defaultdict(list)
        for job in jobs:
            by_queue[job.queue] += [_delay_ms(job, now), job.to_json()]
        tokens = min(len(jobs), WAKE_TOKENS)

        async def push_to(queue: str, pairs: list[Any]) -> None:
            keys = self.keys.queue(queue)
            names = [keys.stream, keys.delayed] + ([] if self.cluster else [self.keys.wake])
            args = [tokens, WAKE_TOKENS, *pairs]
            ids = [job.id for job in jobs if job.queue == queue]
            script = self._script(scripts.PUSH)
            await self._pushes.script(script, names, args, what="push jobs", job_ids=ids)

        if len(by_queue) == 1:
            # The usual case, one queue: awaited here rather than as a task of its own,
            # which would send it a loop turn later (latency) for a task's cost (CPU).
            [(queue, pairs)] = by_queue.items()
            await push_to(queue, pairs)
        else:
            pushes = [push_to(q, pairs) for q, pairs in by_queue.items()]
            if self._replicated is None:
                await asyncio.gather(*pushes)
            else:
                raise_first(await asyncio.gather(*pushes, return_exceptions=True))
        if self.cluster:
            await wake_apart(self.client, self.keys.wake, tokens)
        return [job.id for job in jobs]

    @override
    async def push_raw(self, queue: str, body: str) -> None:
        """Append `body` as-is (field `body`) to the queue's stream, for a foreign consumer.

        If this library's own workers reserve it, it is not a job: it goes to
        the failed store under the name `rainier-queue:not-a-job`.
        """
        stream = self.keys.queue(queue).stream
        await self._ready()
        xadd = ("XADD", stream, "*", "body", body)
        # On a cluster the wake-up list is on another slot, so it is a command of its own.
        sent = [xadd] if self.cluster else [xadd, *wake_commands(self.keys.wake, 1)]
        await self._pushes.commands(sent, what="push a raw body", job_ids=[])
        if self.cluster:
            await wake_apart(self.client, self.keys.wake, 1)

    # -- reserving -----------------------------------------------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        await self._check_now_and_then()
        out, malformed = await self._reserve_once(queue, limit)
        return await self._top_up(queue, limit, out, malformed)

    async def _reserve_once(self, queue: str, limit: int) -> tuple[list[Reservation], int]:
        keys, args, now = self._reserve_call(queue, limit)
        rows = await self._run(scripts.RESERVE, keys.reserve_keys, args, f"reserve from {queue!r}")
        return await self._reservations(queue, keys, rows, args, now)

    async def _top_up(
        self, queue: str, limit: int, out: list[Reservation], malformed: int
    ) -> list[Reservation]:
        """Reserve again for the places entries that were not jobs took, a bounded number of times.

        An empty answer must mean an empty queue, or a `--stop-when-empty`
        worker would stop with jobs waiting behind a run of foreign entries.
        """
        passes = 1
        while malformed and len(out) < limit and passes < MAX_RESERVE_PASSES:
            more, malformed = await self._reserve_once(queue, limit - len(out))
            out += more
            passes += 1
        return out

    @property
    @override
    def combines_acknowledge_and_reserve(self) -> bool:
        return True

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        """One round trip, and both happen or neither does.

        Acknowledgements from the queue being reserved from (a worker's usual
        case) go with the reserve in one script, which works on a cluster too
        (one queue, one slot). Others need a MULTI/EXEC over both scripts,
        which a cluster cannot run across slots, so there they go apart.
        """
        if not reservations or limit < 1:
            return await super().acknowledge_and_reserve(reservations, queue, limit=limit)
        if all(r.job.queue == queue for r in reservations):
            return await self._acknowledge_and_reserve_one_queue(reservations, queue, limit)
        if self.cluster:
            return await super().acknowledge_and_reserve(reservations, queue, limit=limit)
        await self._check_now_and_then()
        by_queue: dict[str, list[int]] = defaultdict(list)
        for i, reservation in enumerate(reservations):
            by_queue[reservation.job.queue].append(i)
        client = await self._ready()
        pipe = client.pipeline(transaction=True)
        for name, indexes in by_queue.items():
            ack_keys = self.keys.queue(name)
            pipe.eval(
                scripts.ACKNOWLEDGE,
                3,
                ack_keys.stream,
                ack_keys.leases,
                ack_keys.deliveries,
                *self._ack_args(reservations, indexes),
            )
        keys, args, now = self._reserve_call(queue, limit)
        pipe.eval(scripts.RESERVE, len(keys.reserve_keys), *keys.reserve_keys, *args)
        async with translated(f"acknowledge jobs and reserve from {queue!r}"):
            answers = await pipe.execute()
        outcomes: list[Exception | None] = [None] * len(reservations)
        for indexes, done in zip(by_queue.values(), answers, strict=False):
            for i, ok in zip(indexes, done, strict=True):
                outcomes[i] = None if ok else self._lost(reservations[i])
        out, malformed = await self._reservations(queue, keys, answers[-1], args, now)
        return outcomes, await self._top_up(queue, limit, out, malformed)

    async def _acknowledge_and_reserve_one_queue(
        self, reservations: Sequence[Reservation], queue: str, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        await self._check_now_and_then()
        keys, args, now = self._reserve_call(queue, limit)
        call = [*args[:4], len(reservations), args[4]]
        for reservation in reservations:
            call += [str(reservation.handle), reservation.token]
        acked, rows = await self._run(
            scripts.ACKNOWLEDGE_AND_RESERVE,
            keys.reserve_keys,
            call,
            f"acknowledge jobs and reserve from {queue!r}",
        )
        outcomes: list[Exception | None] = [
            None if ok else self._lost(reservation)
            for reservation, ok in zip(reservations, acked, strict=True)
        ]
        out, malformed = await self._reservations(queue, keys, rows, args, now)
        return outcomes, await self._top_up(queue, limit, out, malformed)

    def _reserve_call(self, queue: str, limit: int) -> tuple[QueueKeys, list[Any], datetime]:
        """The keys, the arguments and the time of one reserve.

        The last argument is a fresh token: the script gives the i-th job it
        reserves the token `{that}.{i}` (`tokens_for`), so one argument, not
        one per job, travels with each reserve.
        """
        self._served.add(queue)
        now = utcnow()
        lease_ms = max(1, int(self._lease.total_seconds() * 1000))
        return (
            self.keys.queue(queue),
            [GROUP, self.consumer, lease_ms, limit, new_token()],
            now,
        )

    async def _reservations(
        self, queue: str, keys: QueueKeys, rows: Any, args: list[Any], now: datetime
    ) -> tuple[list[Reservation], int]:
        """The reserved entries as reservations, and how many were not jobs (failed here)."""
        tokens = tokens_for(args[4], len(rows))
        until = now + self._lease
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
        log.error(
            "queue %r: stream entry %s is not a job (%s); it is moved to the failed list as it "
            "was stored",
            queue,
            entry_id,
            malformed.reason,
        )
        job = malformed.as_job(queue=queue, job_id=f"raw-{entry_id}")
        await self._store_failure(keys, job, entry_id, token, malformed.error)

    # -- settling ------------------------------------------------------------------

    @staticmethod
    def _ack_args(reservations: Sequence[Reservation], indexes: list[int]) -> list[Any]:
        args: list[Any] = [GROUP]
        for i in indexes:
            args += [str(reservations[i].handle), reservations[i].token]
        return args

    @staticmethod
    def _lost(reservation: Reservation) -> LeaseLost:
        return LeaseLost(
            f"job {reservation.job.id} is no longer reserved by this worker "
            "(its lease lapsed or it was settled already)"
        )

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        result = (await self.acknowledge_many([reservation]))[0]
        if result is not None:
            raise result

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        by_queue: dict[str, list[int]] = defaultdict(list)
        for i, reservation in enumerate(reservations):
            by_queue[reservation.job.queue].append(i)
        results: list[Exception | None] = [None] * len(reservations)

        async def settle(queue: str, indexes: list[int]) -> None:
            keys = self.keys.queue(queue)
            args = self._ack_args(reservations, indexes)
            try:
                done = await self._run(
                    scripts.ACKNOWLEDGE,
                    [keys.stream, keys.leases, keys.deliveries],
                    args,
                    "acknowledge jobs",
                )
            except Exception as exc:
                for i in indexes:
                    results[i] = exc
                return
            for i, ok in zip(indexes, done, strict=True):
                results[i] = None if ok else self._lost(reservations[i])

        await asyncio.gather(*(settle(q, ix) for q, ix in by_queue.items()))
        return results

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        job = reservation.job
        attempts = job.attempts if count_attempt else max(0, job.attempts - 1)
        now = utcnow()
        again = job.with_changes(attempts=attempts, available_at=now + delay)
        keys = self.keys.queue(job.queue)
        due = max(1, round(delay.total_seconds() * 1000)) if delay > timedelta(0) else 0
        ok = await self._run(
            scripts.RELEASE,
            [keys.stream, keys.delayed, keys.leases, keys.deliveries],
            [GROUP, str(reservation.handle), reservation.token, again.to_json(), due],
            f"release job {job.id}",
        )
        if not ok:
            raise self._lost(reservation)
        if not due:
            await wake_apart(await self._ready(), self.keys.wake, 1)

    @override
    async def renew(self, reservation: Reservation) -> None:
        keys = self.keys.queue(reservation.job.queue)
        ok = await self._run(
            scripts.RENEW,
            [keys.stream, keys.leases],
            [GROUP, self.consumer, str(reservation.handle), reservation.token],
            f"renew the lease of job {reservation.job.id}",
        )
        if not ok:
            raise self._lost(reservation)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        keys = self.keys.queue(reservation.job.queue)
        if not await self._store_failure(
            keys, reservation.job, str(reservation.handle), reservation.token, error
        ):
            raise self._lost(reservation)

    async def _store_failure(
        self, keys: QueueKeys, job: QueuedJob, entry_id: str, token: str, error: str
    ) -> bool:
        # ASCII escapes throughout: whatever text the job or the error holds, the
        # record can be written (a lone surrogate in UTF-8 cannot).
        record = json.dumps(
            {"job": job.to_dict(), "error": error, "failed_at": format_time(utcnow())},
            separators=(",", ":"),
        )
        async with translated("record a failed job"):
            await (await self._ready()).sadd(self.keys.failed_queues, job.queue)
        ok = await self._run(
            scripts.FAIL,
            [keys.stream, keys.leases, keys.deliveries, keys.failed],
            [GROUP, entry_id, token, record],
            f"fail job {job.id}",
        )
        return bool(ok)

    # -- size and clear ------------------------------------------------------------

    @override
    async def size(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        return int(
            await self._run(scripts.SIZE, [keys.stream, keys.delayed], [GROUP], "count jobs")
        )

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: the stream, its pending list and the delayed set, read in one script."""
        keys = self.keys.queue(queue)
        lease_ms = max(1, int(self._lease.total_seconds() * 1000))
        answer = await self._run(
            scripts.COUNTS, [keys.stream, keys.delayed], [GROUP, lease_ms], "count jobs"
        )
        waiting, delayed, reserved, known, soonest_ms = (int(v) for v in answer)
        return QueueCounts(
            waiting=waiting,
            delayed=delayed,
            reserved=reserved,
            next_due=utcnow() + timedelta(milliseconds=soonest_ms) if known else None,
        )

    @override
    async def clear(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        return int(
            await self._run(
                scripts.CLEAR, [keys.stream, keys.delayed, keys.leases], [], f"clear {queue!r}"
            )
        )

    @override
    async def on_worker_stop(self) -> None:
        """Remove this worker's consumer from each group it read, and long-idle empty ones.

        Every worker process reads under a consumer name of its own, and Redis
        keeps a consumer until it is deleted, so without this a group would
        gather one per process ever started. A consumer still holding entries
        (a settle that failed) is kept, so another worker can reclaim them.
        """
        idle_ms = int(CONSUMER_IDLE_LIMIT.total_seconds() * 1000)
        for queue in sorted(self._served):
            await self._run(
                scripts.RETIRE_CONSUMERS,
                [self.keys.queue(queue).stream],
                [GROUP, self.consumer, idle_ms],
                f"retire consumers of {queue!r}",
            )

    @override
    async def aclose(self) -> None:
        if self._blocking is not None:
            self._blocking.cancel()
            await asyncio.gather(self._blocking, return_exceptions=True)
        if isinstance(self._client, Redis):
            await self._kept.give_back(self._client.connection_pool)
        await self._pushes.give_back()
        async with translated("close the connection"):
            await self._client.aclose()


def tokens_for(nonce: str, count: int) -> list[str]:
    """The tokens a reserve script gave its `count` jobs: `{nonce}.1`, `{nonce}.2`, ..."""
    return [f"{nonce}.{i}" for i in range(1, count + 1)]
