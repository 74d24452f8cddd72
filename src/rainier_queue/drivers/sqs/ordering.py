# SPDX-License-Identifier: MIT
"""One job at a time per ordering key, although one receive can bring several of a key.

On a FIFO queue a key's jobs share a message group, and SQS hands a group
out in order, and to nobody while a message of it is in flight. But one
`ReceiveMessage` may bring *several* messages of one group at once, and a
worker running them side by side would break the key's one-at-a-time. So
the jobs of a key that a receive brought behind the first wait here, in
order, still in flight (holding the group from every other worker, as SQS's
own rule has it), and go out one by one as each one before settles.

The key is held by a *reservation* (its token), not by a job: a settle of a
delivery whose lease lapsed is stale (`LeaseLost`) and frees nothing, and a
key whose holder lapsed is free again, since SQS hands its group out again.
A receive that brings the job holding a key again (its lease lapsed and SQS
gave it back) takes the key over. Jobs waiting here whose own leases lapsed
are dropped: SQS shows them again, behind the job before them.

What it costs: a job waiting here is not renewed; should it wait longer than
the lease (the visibility timeout) it lapses, is let go, and comes back to
whoever receives its group next, that receive counted as a delivery. Keep a
keyed job's lease longer than the run of the jobs of its key that one
receive can bring (ten at most). A job without a key passes with one look at
its headers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..._clock import utcnow
from ...queue import Reservation
from .messages import ordering_key


class KeyGate:
    """Which ordering keys have a job out in this process, and the jobs waiting behind them."""

    def __init__(self, live: Callable[[str], bool]) -> None:
        self._live = live
        """Whether the reservation with this token still holds its lease."""
        self._out: dict[str, tuple[str, str]] = {}
        """Each key with a job handed out: the reservation's token and the job's id."""
        self._waiting: list[Reservation] = []
        """Jobs received behind another of their key, in the order received."""

    def _holds(self, key: str, job_id: str | None = None) -> bool:
        held = self._out.get(key)
        if held is None:
            return False
        if held[1] == job_id or not self._live(held[0]):
            del self._out[key]  # its lease lapsed: SQS hands the key's group out again
            return False
        return True

    def admit(self, received: Sequence[Reservation]) -> list[Reservation]:
        """Those of `received` (one receive, in SQS's order) that may run now; the rest wait."""
        out: list[Reservation] = []
        for reservation in received:
            key = ordering_key(reservation.job)
            if key is None:
                out.append(reservation)
            elif self._holds(key, reservation.job.id):
                self._waiting.append(reservation)
            else:
                self._out[key] = (reservation.token, reservation.job.id)
                out.append(reservation)
        return out

    def next_up(self, queue: str, limit: int) -> list[Reservation]:
        """Up to `limit` waiting jobs of `queue` whose key has none out now (lapsed ones are
        dropped: the receiver's ledger hands them back)."""
        if not self._waiting or limit < 1:
            return []
        now = utcnow()
        out: list[Reservation] = []
        kept: list[Reservation] = []
        for reservation in self._waiting:
            if reservation.lease_until is not None and reservation.lease_until <= now:
                continue
            key = ordering_key(reservation.job)
            assert key is not None
            if len(out) < limit and reservation.job.queue == queue and not self._holds(key):
                self._out[key] = (reservation.token, reservation.job.id)
                out.append(reservation)
            else:
                kept.append(reservation)
        self._waiting = kept
        return out

    def ready(self, queues: Sequence[str]) -> bool:
        """True when a waiting job of one of `queues` has no job of its key out."""
        return any(
            r.job.queue in queues and not self._holds(ordering_key(r.job) or "")
            for r in self._waiting
        )

    def waiting(self, queue: str) -> list[Reservation]:
        """The jobs of `queue` waiting here behind their key."""
        return [r for r in self._waiting if r.job.queue == queue]

    def settled(self, reservation: Reservation) -> None:
        """`reservation` is settled (or its settle gave up): the next of its key may go,
        unless a newer delivery holds the key (a stale settle frees nothing)."""
        key = ordering_key(reservation.job)
        if key is not None and self._out.get(key, ("", ""))[0] == reservation.token:
            del self._out[key]

    def drop(self, queue: str) -> list[Reservation]:
        """Forget the jobs of `queue` waiting here (the queue was cleared under them)."""
        dropped = self.waiting(queue)
        self._waiting = [r for r in self._waiting if r.job.queue != queue]
        return dropped

    def let_go(self) -> list[Reservation]:
        """Every waiting job, for the receiver to hand back at close."""
        waiting, self._waiting = self._waiting, []
        return waiting


__all__ = ["KeyGate"]
