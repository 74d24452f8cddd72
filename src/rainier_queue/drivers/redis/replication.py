# SPDX-License-Identifier: MIT
"""Durable pushes: a push that waits for replicas to confirm it, or says they did not.

Redis answers a write from memory and ships it to its replicas afterwards.
A primary that dies in between takes the write with it: the caller was told
the job was queued, and the replica promoted in the primary's place never
had it. `WAIT <replicas> <timeout>`, sent on the connection that made the
write, blocks until that many replicas have acknowledged everything the
connection wrote (or the timeout passes) and answers how many did.

With `wait_replicas` set, each push is sent with a `WAIT` behind it on one
connection, in one round trip, so the push returns only once the replicas
have the job. Fewer confirmations than asked raise `NotReplicated`: the job
*is* queued on the primary, so pushing it again would queue it twice, but
it is not known to outlive a failover. A connection lost after the push was
sent raises `OutcomeUnknown`: the push may or may not have been written.
Neither is retried here; the caller is the one who can decide.

Only pushes wait. Every other write is a move inside one script (a release
puts the job back as it drops the delivered entry; a retry from the failed
store moves it back to the stream) and replicates as one unit, so a replica
that missed it still holds the job where it was before, and after a
failover it is delivered again: a duplicate run, never a loss. Waiting
there would cost every job a round trip to buy fewer duplicates.

On a cluster each queue's slot has a primary (and replicas) of its own;
this mode is built for a single primary, so `wait_replicas` is refused
there at configuration time. A cluster's pushes still hold their
connection for the answer (`cluster_writes.py`), without a `WAIT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from redis import exceptions as rx
from redis.asyncio import Redis

from ...durations import format_duration
from ...errors import ConfigurationError, NotReplicated, OutcomeUnknown
from ..options import Options
from .connection import Client, refusal, translated
from .kept import KeptConnection
from .resp import pack

if TYPE_CHECKING:
    from redis.asyncio.connection import AbstractConnection
    from redis.commands.core import AsyncScript

OPTIONS = frozenset({"wait_replicas", "wait_timeout"})
DEFAULT_WAIT_TIMEOUT = timedelta(seconds=1)

_SLACK = 5.0
"""Seconds past the `WAIT` timeout before a silent server counts as a lost connection."""


@dataclass(frozen=True, slots=True)
class Durability:
    """How many replicas must confirm each push, and how long to wait for them."""

    replicas: int
    timeout: timedelta = DEFAULT_WAIT_TIMEOUT

    @property
    def timeout_ms(self) -> int:
        return max(1, round(self.timeout.total_seconds() * 1000))

    def describe(self) -> str:
        return f"wait_replicas={self.replicas} wait_timeout={format_duration(self.timeout)}"


def durability_from(settings: Options) -> Durability | None:
    """The `wait_replicas` / `wait_timeout` settings, checked; None when pushes do not wait."""
    replicas = settings.count("wait_replicas", 0, minimum=0)
    timeout = settings.duration("wait_timeout", DEFAULT_WAIT_TIMEOUT)
    if timeout < timedelta(milliseconds=1):
        raise ConfigurationError(
            "`wait_timeout` must be at least 1ms: Redis's WAIT with a timeout of 0 waits "
            "for ever, and a push must not hang on a replica that is gone"
        )
    if replicas == 0:
        return None
    return Durability(replicas, timeout)


class HeldWrites:
    """Pushes sent on a connection held from before the send until the answer.

    Holding the connection is what tells a push that never left (a plain
    outage, safe to retry) from one whose answer was lost (`OutcomeUnknown`),
    so every push goes through a subclass: `ReplicatedWrites` on a single
    server (with `Durability(0)` when nothing is to be confirmed), and
    `ClusterWrites` (in `cluster_writes.py`) on a cluster.
    """

    def __init__(self, client: Client, durability: Durability, where: str) -> None:
        self._client = client
        self.durability = durability
        self._where = where

    async def script(
        self,
        script: AsyncScript,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        what: str,
        job_ids: Sequence[str],
    ) -> Any:
        """Run `script` (by its SHA, loading it once if the server lacks it), then wait."""
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        replies, where = await self._write([command], what=what)
        if isinstance(replies[0], rx.NoScriptError):  # nothing ran; load it and send again
            async with translated(f"load the script to {what}"):
                await self._client.script_load(script.script)
            replies, where = await self._write([command], what=what)
        return self._checked(replies, where, what=what, job_ids=job_ids)[0]

    async def commands(
        self, commands: Sequence[Sequence[Any]], *, what: str, job_ids: Sequence[str]
    ) -> list[Any]:
        """Send `commands` (and a `WAIT`, if asked for) in one round trip; their replies."""
        replies, where = await self._write(commands, what=what)
        return self._checked(replies, where, what=what, job_ids=job_ids)

    def _checked(
        self, replies: list[Any], where: str, *, what: str, job_ids: Sequence[str]
    ) -> list[Any]:
        wanted = self.durability.replicas
        *answers, confirmed = replies if wanted else [*replies, 0]
        for answer in answers:
            if isinstance(answer, rx.ResponseError):
                raise refusal(what, answer) from answer
        if not isinstance(confirmed, int) or confirmed < wanted:
            count = confirmed if isinstance(confirmed, int) else 0
            raise NotReplicated(
                f"the Redis primary at {where} wrote the push, but {count} of "
                f"{wanted} replica(s) confirmed it within "
                f"{format_duration(self.durability.timeout)}. The jobs are queued and run if "
                "the primary lives until they replicate; a failover before then loses them. "
                "Do not push them again (that would queue them twice); find out why the "
                "replicas lag (`rainier-queue doctor` shows how many are connected)",
                job_ids=job_ids,
                confirmed=count,
                wanted=wanted,
            )
        return answers

    async def _write(
        self, commands: Sequence[Sequence[Any]], *, what: str
    ) -> tuple[list[Any], str]:
        """Every reply (error replies as exceptions in the list), the `WAIT` count last;
        and the primary that answered."""
        raise NotImplementedError

    async def give_back(self) -> None:
        """Hand back any connection kept between pushes (the queue is closing)."""

    async def _held(
        self, conn: AbstractConnection, commands: Sequence[Sequence[Any]], where: str
    ) -> list[Any]:
        """`commands` sent on `conn`, already connected: once the bytes left, never again.

        A lost connection may have lost the reply of a write that happened, so
        it is `OutcomeUnknown`, and `conn` is dropped (a reply may still come).
        """
        try:
            return await self._exchange(conn, commands)
        except (rx.ConnectionError, rx.TimeoutError, OSError) as exc:
            await conn.disconnect(nowait=True)
            raise OutcomeUnknown(
                f"the connection to Redis at {where} was lost after the push was sent, "
                f"so whether it was written is unknown (it is not retried): {exc}"
            ) from exc
        except BaseException:
            await conn.disconnect(nowait=True)  # a reply may still be on its way
            raise

    async def _exchange(
        self, conn: AbstractConnection, commands: Sequence[Sequence[Any]]
    ) -> list[Any]:
        waits = self.durability.replicas > 0
        wait = [("WAIT", self.durability.replicas, self.durability.timeout_ms)] if waits else []
        encoder = conn.encoder
        packed = pack([*commands, *wait], encoder.encoding, encoder.encoding_errors)
        await conn.send_packed_command(packed)
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response())
            except rx.ResponseError as exc:
                replies.append(exc)
        if not waits:
            return replies
        # The server answers WAIT when its timeout passes; give it that long and then some.
        limit = self.durability.timeout.total_seconds() + max(_SLACK, conn.socket_timeout or 0)
        confirmed = await conn.read_response(timeout=limit)  # None: the time ran out
        if confirmed is None:
            raise rx.TimeoutError(f"no answer to WAIT within {limit:g}s")
        replies.append(confirmed)
        return replies


class ReplicatedWrites(HeldWrites):
    """Pushes to a single server, each followed by `WAIT` when replicas must confirm it."""

    def __init__(self, client: Client, durability: Durability) -> None:
        if not isinstance(client, Redis):
            raise ConfigurationError("`wait_replicas` is not supported on a Redis Cluster")
        kwargs = client.connection_pool.connection_kwargs
        where = str(kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}")
        super().__init__(client, durability, where)
        self._pool = client.connection_pool
        self._kept = KeptConnection()

    async def _write(
        self, commands: Sequence[Sequence[Any]], *, what: str
    ) -> tuple[list[Any], str]:
        """Connecting happens before anything is sent, so a failure there is a plain outage.

        The connection is kept for the next push (`KeptConnection`) when its
        exchange ended cleanly; `_held` has dropped one that did not.
        """
        async with translated(what):
            conn = await self._kept.take(self._pool)
        clean = False
        try:
            replies = await self._held(conn, commands, self._where)
            clean = True
            return replies, self._where
        finally:
            await self._kept.put_back(self._pool, conn, clean=clean)

    async def give_back(self) -> None:
        await self._kept.give_back(self._pool)


def raise_first(outcomes: Sequence[BaseException | None]) -> None:
    """Raise the first failure of a push to several queues, shortfalls merged into one.

    Any other failure wins, since the caller must see the outage. If every
    failure is a shortfall, one `NotReplicated` names all their jobs.
    """
    failures = [o for o in outcomes if o is not None]
    for failure in failures:
        if not isinstance(failure, NotReplicated):
            raise failure
    if not failures:
        return
    short = cast(list[NotReplicated], failures)
    raise NotReplicated(
        str(short[0]),
        job_ids=[i for f in short for i in f.job_ids],
        confirmed=min(f.confirmed for f in short),
        wanted=short[0].wanted,
    )


__all__ = [
    "DEFAULT_WAIT_TIMEOUT",
    "OPTIONS",
    "Durability",
    "HeldWrites",
    "ReplicatedWrites",
    "durability_from",
    "raise_first",
]
