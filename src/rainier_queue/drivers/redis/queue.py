# SPDX-License-Identifier: MIT
"""`RedisQueue`: the Queue port on Redis streams (see the package docstring for the costs).

The queue is composed of parts, each an object of its own on the one client
(`connection.Calls`) and key family (`keys.Keys`): `RedisPusher` pushes
(through `replication.HeldWrites`), `RedisReserver` reserves and reads what
it reserved, `RedisWaiter` waits for work (with the reserve behind the
wait), `RedisSettler` acknowledges, releases and renews, `RedisFailedStore`
keeps the failed list, `RedisHealth` answers `doctor` and watches for a
wiped dataset. Ordering keys live in those parts' scripts (`ordering.py`).
What is left here is the port: each method says which part does the work,
or does it in one script.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from redis.asyncio import Redis
from typing_extensions import override

from ..._clock import utcnow
from ...envelope import QueuedJob
from ...errors import ConfigurationError
from ...jobstate import Found
from ...queue import (
    DEFAULT_LEASE,
    Capabilities,
    FailedJob,
    Queue,
    QueueCounts,
    Reservation,
    Rewrite,
    Rewritten,
)
from ...redact import redact_url
from ..options import check_lease
from . import scripts
from .batching import RedisBatches
from .cluster_writes import ClusterWrites
from .connection import Calls, Client, translated
from .diagnosis import Diagnosis
from .failed import RedisFailedStore
from .health import RedisHealth
from .keys import DEFAULT_PREFIX, GROUP, Keys, check_prefix
from .lookup import RedisLookup
from .pausing import RedisPauses
from .pushing import RedisPusher
from .replication import OPTIONS as DURABILITY_OPTIONS
from .replication import Durability, HeldWrites, ReplicatedWrites, durability_from
from .reserving import RedisReserver, lost
from .rewriting import RedisRewriter
from .settings import RedisSettings
from .settling import RedisSettler
from .waiting import RedisWaiter

if TYPE_CHECKING:
    from .. import DriverContext

CONSUMER_IDLE_LIMIT = timedelta(hours=1)
"""A stopping worker also removes other consumers idle this long that hold nothing."""

QUEUE_OPTIONS = frozenset({"lease", "consumer", *DURABILITY_OPTIONS})
"""The options the queue takes beyond its connection's (`RedisSettings.OPTIONS`)."""


def _consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class RedisQueue(Queue):
    """Redis streams with a consumer group, delayed jobs in a sorted set, Lua-fenced settles."""

    name: ClassVar[str] = "redis"
    idle_wait: ClassVar[str] = (
        "a BLPOP on a wake-up list that each push fills, the reserve queued behind it"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=True,
        shared_between_processes=True,
        may_lose_accepted_job=True,
        raw_push=True,
        due_on_server_clock=True,
        pausable=True,
        limits=True,
        job_lookup=True,
        records=True,
        cancellable=True,
        batches=True,
        ordering_keys=True,
    )

    OPTIONS: ClassVar[frozenset[str]] = RedisSettings.OPTIONS | QUEUE_OPTIONS

    @classmethod
    def from_config(cls, url: str, options: Mapping[str, Any], context: DriverContext) -> Self:
        """`redis://host:6379/0?prefix=app:`, `rediss://`, `unix:///path`, `redis-cluster://h:p,h:p`."""
        settings, own = RedisSettings.read(
            url, options, who="the `redis` driver", extra=QUEUE_OPTIONS
        )
        try:
            prefix = check_prefix(DEFAULT_PREFIX if settings.prefix is None else settings.prefix)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        return cls(
            settings.client(decode=True),
            prefix=prefix,
            lease=own.lease(DEFAULT_LEASE),
            consumer=own.get("consumer"),
            url=url,
            cluster=settings.cluster,
            durability=durability_from(own),
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
        self._lease = check_lease(lease)
        self._client = client
        self._calls = Calls(client)
        self.keys = Keys(check_prefix(prefix))
        self.consumer = consumer or _consumer_name()
        self._url = url
        self.cluster = cluster or not isinstance(client, Redis)
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
        self.failed = RedisFailedStore(self._calls, self.keys)
        """The failed list (`FailedJobStore`), a part of its own."""
        self._rewriter = RedisRewriter(self._calls, self.keys)
        """Stored payloads rewritten in place (`RewritesStoredJobs`, for `reencrypt`)."""
        self.lookup = RedisLookup(self._calls, self.keys, self.failed, lease)
        """Finding a job by id, and the records (`jobstate.py`), a part of its own."""
        self.health = RedisHealth(
            self._calls.ready,
            self.keys,
            url=url,
            replicated=self._replicated,
            describe=self.describe,
        )
        """`doctor`'s checks and the watch for a wiped dataset."""
        self._reserver = RedisReserver(
            self._calls,
            self.keys,
            consumer=self.consumer,
            lease=lease,
            failed=self.failed,
            health=self.health,
            cluster=self.cluster,
        )
        self.pauses = RedisPauses(self._calls, self.keys)
        """The paused queues (`Pausable`), a set of the namespace."""
        self.batch_store = RedisBatches(self._calls, self.keys, cluster=self.cluster)
        """Batches (`BatchStore`), a hash and a set each, recorded by one script."""
        self._pusher = RedisPusher(
            self._calls,
            self.keys,
            client,
            self._pushes,
            cluster=self.cluster,
            replicated=self._replicated is not None,
        )
        """Pushes (`pushing.py`), keyed jobs into their keys' lines (`ordering.py`)."""
        self._settler = RedisSettler(self._calls, self.keys, consumer=self.consumer)
        """Acknowledgements, releases and renewals (`settling.py`)."""
        self._waiter = RedisWaiter(
            self._calls,
            self.keys,
            lease=lease,
            cluster=self.cluster,
            reserver=self._reserver,
            hand_back=self.hand_back_unstarted,
        )

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

    # -- pushing (RedisPusher) ----------------------------------------------------

    @override
    async def push(self, job: QueuedJob) -> str:
        """Off-cluster and keyless, due now: `XADD` and the wake-up in one round trip."""
        return await self._pusher.push(job)

    @override
    async def push_many(self, jobs: Sequence[QueuedJob]) -> list[str]:
        """One script per queue (each one slot); off-cluster the wake-up rides along."""
        return await self._pusher.push_many(jobs)

    @override
    async def push_raw(self, queue: str, body: str) -> None:
        """Append `body` as-is (field `body`) to the queue's stream, for a foreign consumer.

        If this library's own workers reserve it, it is not a job: it goes to
        the failed store under the name `rainier-queue:not-a-job`.
        """
        await self._pusher.push_raw(queue, body)

    # -- reserving and waiting (RedisReserver, RedisWaiter) ------------------------

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        if limit < 1:
            return []
        return await self._reserver.reserve(queue, limit)

    @property
    @override
    def combines_acknowledge_and_reserve(self) -> bool:
        return True

    @override
    async def acknowledge_and_reserve(
        self, reservations: Sequence[Reservation], queue: str, *, limit: int
    ) -> tuple[list[Exception | None], list[Reservation]]:
        """One round trip, and both happen or neither does (`RedisReserver`); on a cluster,
        acknowledgements from other queues than `queue` go apart."""
        if reservations and limit >= 1:
            both = await self._reserver.acknowledge_and_reserve(reservations, queue, limit)
            if both is not None:
                return both
        return await super().acknowledge_and_reserve(reservations, queue, limit=limit)

    @property
    @override
    def reserves_behind_wait(self) -> bool:
        return self._waiter.reserves_behind_wait

    @override
    async def wait_and_reserve(
        self, queue: str, timeout: timedelta, *, limit: int
    ) -> list[Reservation]:
        """The reserve script sent right behind the BLPOP, on one connection (`behind_blpop`)."""
        if limit < 1 or not self._waiter.reserves_behind_wait:
            return await super().wait_and_reserve(queue, timeout, limit=limit)
        seconds = await self._waiter.seconds([queue], timeout)
        if seconds > 0.001:
            taken = await self._waiter.reserve_behind(queue, seconds, limit)
            if taken is not None:
                return taken
        return await self._reserve_handing_back(queue, limit)

    @override
    async def wait_for_work(self, queues: Sequence[str], timeout: timedelta) -> None:
        await self._waiter.wait(queues, timeout)

    # -- settling ------------------------------------------------------------------

    @override
    async def acknowledge(self, reservation: Reservation) -> None:
        result = (await self.acknowledge_many([reservation]))[0]
        if result is not None:
            raise result

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        """One script per queue, concurrently (`RedisSettler`)."""
        return await self._settler.acknowledge_many(reservations)

    @override
    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        await self._settler.release(reservation, delay=delay, count_attempt=count_attempt)

    @override
    async def renew(self, reservation: Reservation) -> None:
        await self._settler.renew(reservation)

    @override
    async def fail(self, reservation: Reservation, error: str) -> None:
        keys = self.keys.queue(reservation.job.queue)
        if not await self.failed.record(
            keys, reservation.job, str(reservation.handle), reservation.token, error
        ):
            raise lost(reservation)

    # -- size and clear ------------------------------------------------------------

    @override
    async def size(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        return int(
            await self._calls.run(
                scripts.SIZE, [keys.stream, keys.delayed, keys.line], [GROUP], "count jobs"
            )
        )

    async def counts(self, queue: str) -> QueueCounts:
        """`Countable`: the stream, its pending list and the delayed set, read in one script."""
        keys = self.keys.queue(queue)
        lease_ms = max(1, int(self._lease.total_seconds() * 1000))
        answer = await self._calls.run(
            scripts.COUNTS, [keys.stream, keys.delayed, keys.line], [GROUP, lease_ms], "count jobs"
        )
        waiting, delayed, reserved, known, soonest_ms = (int(v) for v in answer)
        return QueueCounts(
            waiting=waiting,
            delayed=delayed,
            reserved=reserved,
            next_due=utcnow() + timedelta(milliseconds=soonest_ms) if known else None,
        )

    async def oldest_wait(self, queue: str) -> timedelta | None:
        """`OldestWaiting`: read in one script, on the server's clock (scripts.OLDEST)."""
        keys = self.keys.queue(queue)
        answer = await self._calls.run(
            scripts.OLDEST, [keys.stream, keys.delayed], [GROUP], "read the oldest job"
        )
        waited = int(answer)
        return None if waited < 0 else timedelta(milliseconds=waited)

    @override
    async def clear(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        return int(
            await self._calls.run(
                scripts.CLEAR,
                [keys.stream, keys.delayed, keys.leases, keys.heads, keys.line, keys.held],
                [],
                f"clear {queue!r}",
            )
        )

    # -- JobLookup and RecordStore: the lookup part (lookup.py) ------------------

    async def find_job(self, job_id: str) -> Found | None:
        """The job in a stream, a delayed set or a failed list; None if in none (a scan)."""
        return await self.lookup.find_job(job_id)

    async def ahead_of(self, job_id: str) -> str | None:
        """`OrderingLookup`: the job holding `job_id`'s ordering key, if another (a scan)."""
        return await self.lookup.ahead_of(job_id)

    async def put_record(self, key: str, value: bytes, ttl: timedelta) -> None:
        await self.lookup.put_record(key, value, ttl)

    async def get_record(self, key: str) -> bytes | None:
        return await self.lookup.get_record(key)

    async def forget_record(self, key: str) -> bool:
        return await self.lookup.forget_record(key)

    async def records(self, prefix: str) -> list[bytes]:
        return await self.lookup.records(prefix)

    @override
    async def on_worker_stop(self) -> None:
        """Remove this worker's consumer from each group it read, and long-idle empty ones.

        Every worker process reads under a consumer name of its own, and Redis
        keeps a consumer until it is deleted, so without this a group would
        gather one per process ever started. A consumer still holding entries
        (a settle that failed) is kept, so another worker can reclaim them.
        """
        idle_ms = int(CONSUMER_IDLE_LIMIT.total_seconds() * 1000)
        for queue in sorted(self._reserver.served):
            await self._calls.run(
                scripts.RETIRE_CONSUMERS,
                [self.keys.queue(queue).stream],
                [GROUP, self.consumer, idle_ms],
                f"retire consumers of {queue!r}",
            )

    @override
    async def aclose(self) -> None:
        await self._waiter.aclose()
        await self._pushes.give_back()
        async with translated("close the connection"):
            await self._client.aclose()

    # -- rewriting stored payloads (RewritesStoredJobs) --------------------------------

    async def rewrite_payloads(self, rewrite: Rewrite) -> Rewritten:
        """Delayed, waiting and failed jobs rewritten in place; jobs workers hold counted as
        in flight and left (see `rewriting`, which does the work)."""
        return await self._rewriter.rewrite(rewrite)

    # -- paused queues (Pausable, RedisPauses) -------------------------------------

    async def pause(self, queue: str) -> bool:
        return await self.pauses.pause(queue)

    async def resume(self, queue: str) -> bool:
        return await self.pauses.resume(queue)

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        return await self.pauses.paused(queues)

    # -- the failed list (FailedJobStore) --------------------------------------------

    async def failed_jobs(self, *, queue: str | None = None, limit: int = 100) -> list[FailedJob]:
        """Failed jobs, newest first, each with its full envelope and error."""
        return await self.failed.failed_jobs(queue=queue, limit=limit)

    async def retry_failed(self, job_id: str) -> bool:
        """Queue a failed job again, due now, with attempts at zero; False if no such job."""
        return await self.failed.retry_failed(job_id)

    async def forget_failed(self, job_id: str) -> bool:
        """Delete a failed job for good; False if no such job."""
        return await self.failed.forget_failed(job_id)

    async def flush_failed(self, *, queue: str | None = None) -> int:
        """Delete every failed job (of `queue`, or all); how many."""
        return await self.failed.flush_failed(queue=queue)

    # -- health (Diagnosable, HealthNotes) -----------------------------------------

    async def diagnose(self) -> Diagnosis:
        """maxmemory-policy, persistence and replication, with a warning for each unsafe one."""
        return await self.health.diagnose()

    async def health_warnings(self) -> list[str]:
        """The warnings of `diagnose`, and how jobs travel, for `rainier-queue doctor`."""
        return await self.health.health_warnings()

    async def health_notes(self) -> list[str]:
        """The replication role and durable-push setting, for `doctor` (`HealthNotes`)."""
        return await self.health.health_notes()

    async def check_dataset(self) -> bool:
        """False (and an error logged) if the Redis under us lost its data since we last looked."""
        return await self.health.check_dataset()


__all__ = ["CONSUMER_IDLE_LIMIT", "RedisQueue"]
