# SPDX-License-Identifier: MIT
"""NATS's side of the driver's fencing: what a delivery is, and the settles sent for it.

NATS 2.9 does not fence (brokers.md §2, fact 9): an ack from a delivery
whose `ack_wait` ran out, sent while a second worker runs the job, is
accepted and deletes the message under that worker; a stale `+WPI` extends
the second delivery's timer, and a stale `-NAK` hands the job out a third
time. So every delivery is held in the toolkit's ledger (drivers/fencing.py,
which says what it guarantees), and an ack, renewal (`+WPI`), release
(`-NAK`) or termination (`+TERM`) is sent only before its deadline.

Here a delivery's lease runs from its arrival, stamped in fetching.py, which
is no earlier than the server starting its ack timer; the ledger's margin
covers the time on the wire. A delivery found lapsed is forgotten at once:
the server hands it out again by itself when its timer ends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

from ..fencing import Ledger

ACK = b"+ACK"
PROGRESS = b"+WPI"
TERMINATE = b"+TERM"


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


def new_ledger() -> Ledger[Delivery]:
    """The ledger of one NATS queue object's deliveries."""
    return Ledger("NATS")


__all__ = ["ACK", "PROGRESS", "TERMINATE", "Delivery", "nak", "new_ledger"]
