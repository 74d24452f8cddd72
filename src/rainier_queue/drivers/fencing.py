# SPDX-License-Identifier: MIT
"""Fencing kept by the driver, for a broker that does not fence: the ledger of held leases.

Some brokers take a settle from a delivery whose lease ran out. NATS
JetStream accepts an ack from a delivery whose `ack_wait` has passed, and
SQS deletes with a receipt handle it issued before the message went to
another worker. Such a settle lands on the job another worker is running
now: it deletes it under that worker, extends its timer, or hands it out a
third time. The answer is the same for every such broker, so it is
written once, here, and the NATS and SQS drivers keep their leases in it:

- each delivery is held under its reservation's token with a deadline: the
  moment the broker's timer started (or a moment before it: the driver's to
  say which) plus the lease, less `margin`;
- `current` gives the delivery only before its deadline; after it the
  settle is `LeaseLost`, and the driver sends the broker nothing for it;
- a confirmed renewal moves the deadline to the moment it was *sent* plus
  the lease, less the margin (`renewed`).

The margin is a tenth of the lease, at most five seconds: it covers the time
between the broker starting its timer and this process stamping the
delivery, and between a settle being sent and the broker reading it. A
settle sent within the margin of the deadline is refused although it would
probably have counted; the job comes back when the lease ends, an attempt
spent. The guarantee, on every driver that keeps a ledger: a worker that
overran its lease never deletes, extends or hands back the delivery another
worker holds; the job itself may have run twice, as on every driver.

What a delivery is (a reply subject, a receipt handle) and what the broker
adds (SQS's 12-hour cap, handing a lapsed message back early) stay in the
driver; it subclasses `Ledger` for the latter.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Generic, Protocol, TypeVar

from ..errors import LeaseLost

MOST_MARGIN = 5.0
"""The longest margin, in seconds, whatever the lease."""


def margin(lease: timedelta) -> float:
    """Seconds before the broker's timer ends after which the driver sends no settle."""
    return min(lease.total_seconds() / 10, MOST_MARGIN)


class Fenced(Protocol):
    """What the ledger needs of a driver's delivery; the driver's dataclass has the rest."""

    queue: str
    lease: float
    """Seconds of lease the delivery holds, and each renewal gives it."""
    deadline: float
    """`time.monotonic()` after which nothing is sent for it."""


D = TypeVar("D", bound=Fenced)


class Ledger(Generic[D]):
    """The deliveries this process holds, by reservation token, each with its deadline.

    `broker` names the server in a `LeaseLost` ("nothing was sent to SQS").
    `keep_lapsed`: a delivery found lapsed by `current` stays held, for a
    driver that still has something to do with it (SQS hands it back early);
    otherwise it is forgotten there.
    """

    def __init__(self, broker: str, *, keep_lapsed: bool = False) -> None:
        self.broker = broker
        self._keep_lapsed = keep_lapsed
        self._held: dict[str, D] = {}

    def hold(self, token: str, delivery: D, started: float, lease: timedelta) -> float:
        """Hold `delivery` under `token`, its lease counted from `started` (monotonic);
        its deadline is returned."""
        delivery.lease = lease.total_seconds()
        delivery.deadline = started + delivery.lease - margin(lease)
        self._held[token] = delivery
        return delivery.deadline

    def current(self, token: str, job_id: str) -> D:
        """The delivery `token` holds, if its lease has not run out; else `LeaseLost`."""
        delivery = self._held.get(token)
        if delivery is None:
            raise LeaseLost(
                f"job {job_id} is no longer reserved by this worker (it was settled already, "
                "or was not reserved from this queue)"
            )
        if time.monotonic() >= delivery.deadline:
            if not self._keep_lapsed:
                del self._held[token]
            raise LeaseLost(
                f"job {job_id}: its lease ran out (less its margin), so another worker may "
                f"hold it now; nothing was sent to {self.broker} for this delivery"
            )
        return delivery

    def renewed(self, token: str, sent: float) -> float | None:
        """A renewal sent at `sent` (monotonic) was confirmed: the new deadline, counted from
        then; None when the delivery was settled meanwhile."""
        delivery = self._held.get(token)
        if delivery is None:
            return None
        delivery.deadline = sent + delivery.lease - margin(timedelta(seconds=delivery.lease))
        return delivery.deadline

    def get(self, token: str) -> D | None:
        """The delivery held under `token`, lapsed or not, without a check."""
        return self._held.get(token)

    def done(self, token: str) -> None:
        """Forget the delivery: settled, or left to the broker."""
        self._held.pop(token, None)

    def held(self, queue: str) -> list[D]:
        """The deliveries of `queue` held now (lapsed ones a driver keeps included)."""
        return [d for d in self._held.values() if d.queue == queue]

    def tokens(self) -> list[tuple[str, D]]:
        """Every delivery held, with its token."""
        return list(self._held.items())


__all__ = ["MOST_MARGIN", "Fenced", "Ledger", "margin"]
