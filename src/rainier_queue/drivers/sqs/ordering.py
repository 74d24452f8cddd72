# SPDX-License-Identifier: MIT
"""One job at a time per ordering key, although one receive can bring several of a key.

On a FIFO queue a key's jobs share a message group, and SQS hands a group out
in order, never to a second receiver while one holds a message of it. But
one `ReceiveMessage` may bring *several* messages of one group at once, and
a worker running them side by side would break the key's one-at-a-time. So
the jobs of a key that a receive brought behind the first wait here, in
order, still hidden from every other worker (and holding the group, as
SQS's own rule has it), and go out one by one as each one before settles.

What it costs: a job waiting here is not renewed; should it wait longer than
the lease (the visibility timeout) it lapses, is let go, and comes back to
whoever receives its group next, with the receive counted as a delivery.
Keep a keyed job's lease longer than the run of the jobs of its key that one
receive can bring (ten at most). A job without a key passes through with
one look at its headers.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._clock import utcnow
from ...job import ORDERING_KEY
from ...queue import Reservation


class KeyGate:
    """Which ordering keys have a job out in this process, and the jobs waiting behind them."""

    def __init__(self) -> None:
        self._out: dict[str, str] = {}
        """Each key with a job handed out and not settled: the job's id."""
        self._waiting: list[Reservation] = []
        """Jobs received behind another of their key, in the order received."""

    def admit(self, received: Sequence[Reservation]) -> list[Reservation]:
        """Those of `received` that may run now; the rest wait their turn."""
        out: list[Reservation] = []
        for reservation in received:
            headers = reservation.job.headers
            key = headers.get(ORDERING_KEY) if headers else None
            if key is None:
                out.append(reservation)
            elif self._out.get(key, reservation.job.id) != reservation.job.id:
                self._waiting.append(reservation)
            else:
                self._out[key] = reservation.job.id
                out.append(reservation)
        return out

    def next_up(self, queue: str, limit: int) -> list[Reservation]:
        """Up to `limit` waiting jobs of `queue` whose key has none out now (lapsed ones are
        let go: the receiver's ledger hands them back)."""
        if not self._waiting or limit < 1:
            return []
        now = utcnow()
        self._waiting = [r for r in self._waiting if r.lease_until is None or r.lease_until > now]
        out: list[Reservation] = []
        kept: list[Reservation] = []
        for reservation in self._waiting:
            key = reservation.job.headers[ORDERING_KEY]
            if len(out) < limit and reservation.job.queue == queue and key not in self._out:
                self._out[key] = reservation.job.id
                out.append(reservation)
            else:
                kept.append(reservation)
        self._waiting = kept
        return out

    def ready(self, queues: Sequence[str]) -> bool:
        """True when a waiting job of one of `queues` has no job of its key out."""
        return any(
            r.job.queue in queues and r.job.headers[ORDERING_KEY] not in self._out
            for r in self._waiting
        )

    def settled(self, reservation: Reservation) -> None:
        """`reservation` is settled (or its settle gave up): the next of its key may go."""
        headers = reservation.job.headers
        key = headers.get(ORDERING_KEY) if headers else None
        if key is not None and self._out.get(key) == reservation.job.id:
            del self._out[key]

    def let_go(self) -> list[Reservation]:
        """Every waiting job, for the receiver to hand back at close."""
        waiting, self._waiting = self._waiting, []
        return waiting


__all__ = ["KeyGate"]
