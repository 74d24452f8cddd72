# SPDX-License-Identifier: MIT
"""The driver's own fencing: no settle is sent for a delivery whose lease may have run out.

NATS 2.9 does not fence (brokers.md §2, fact 9): an ack from a delivery
whose `ack_wait` ran out, sent while a second worker runs the job, is
accepted and deletes the message under that worker; a stale `+WPI` extends
the second delivery's timer, and a stale `-NAK` hands the job out a third
time. So each delivery is fenced here, in the process that holds it:

- its deadline is its arrival (fetching.py) plus the lease, less `margin`;
- an ack, renewal (`+WPI`), release (`-NAK`) or termination (`+TERM`) is
  sent only before the deadline; after it, the settle is `LeaseLost` and
  nothing reaches the server, which by then may have handed the job on;
- a renewal moves the deadline to the moment it was *sent* plus the lease,
  less the margin, once the server has confirmed it.

The guarantee: a worker that overran its lease never deletes, extends or
hands back the delivery another worker holds. What remains is what every
lease gives: the job itself may have run twice (the overrunning worker's
side effects happened), so jobs must tolerate a rerun.

The margin is a tenth of the lease, at most five seconds: it covers the
time between the server starting its timer and the arrival being stamped,
and between a settle being sent and the server reading it. A settle sent
within the margin of the deadline is refused although it would probably
have counted; the job comes back when the lease ends, an attempt spent.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import timedelta

from ...errors import LeaseLost

MOST_MARGIN = 5.0

ACK = b"+ACK"
PROGRESS = b"+WPI"
TERMINATE = b"+TERM"


def margin(lease: timedelta) -> float:
    """Seconds before the server's timer ends after which this driver sends no settle."""
    return min(lease.total_seconds() / 10, MOST_MARGIN)


def nak(delay: timedelta) -> bytes:
    """A negative acknowledgement that brings the message back after `delay`."""
    if delay <= timedelta(0):
        return b"-NAK"
    return b"-NAK " + json.dumps({"delay": int(delay.total_seconds() * 1e9)}).encode()


@dataclass(slots=True, eq=False)
class Delivery:
    """One delivery of a message, as the reservation's handle: never its payload."""

    reply: str
    """The subject its acks go to (`$JS.ACK.<stream>.<consumer>.<n>.<seq>...`)."""
    stream_seq: int
    delivered: int
    """The server's count of deliveries of this message, this one included."""
    queue: str
    lease: float = field(default=0.0)
    """Seconds of lease each renewal gives: the shorter of the worker's and the server's."""
    deadline: float = field(default=0.0)
    """`time.monotonic()` after which nothing is sent for it."""


class Ledger:
    """The deliveries this process holds, by reservation token, each with its deadline."""

    def __init__(self) -> None:
        self._held: dict[str, Delivery] = {}

    def hold(self, token: str, delivery: Delivery, arrived: float, lease: timedelta) -> float:
        """Record `delivery` under `token`; its deadline (monotonic) is returned."""
        delivery.lease = lease.total_seconds()
        delivery.deadline = arrived + delivery.lease - margin(lease)
        self._held[token] = delivery
        return delivery.deadline

    def current(self, token: str, job_id: str) -> Delivery:
        """The delivery `token` holds, if its lease has not run out; else `LeaseLost`."""
        delivery = self._held.get(token)
        if delivery is None:
            raise LeaseLost(
                f"job {job_id} is no longer reserved by this worker (it was settled already, "
                "or was not reserved from this queue)"
            )
        if time.monotonic() >= delivery.deadline:
            del self._held[token]
            raise LeaseLost(
                f"job {job_id}: its lease ran out (less its margin), so "
                "another worker may hold it now; nothing was sent to NATS for this delivery"
            )
        return delivery

    def renewed(self, token: str, sent: float) -> float:
        """The new deadline of a delivery whose `+WPI`, sent at `sent`, was confirmed."""
        delivery = self._held[token]
        lease = timedelta(seconds=delivery.lease)
        delivery.deadline = sent + delivery.lease - margin(lease)
        return delivery.deadline

    def done(self, token: str) -> None:
        self._held.pop(token, None)

    def held(self, queue: str) -> list[Delivery]:
        return [d for d in self._held.values() if d.queue == queue]

    def all(self) -> dict[str, Delivery]:
        return dict(self._held)


__all__ = ["ACK", "PROGRESS", "TERMINATE", "Delivery", "Ledger", "margin", "nak"]
