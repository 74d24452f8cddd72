# SPDX-License-Identifier: MIT
"""The driver's own fencing: nothing is sent for a delivery whose lease may have run out.

SQS does not fence. A delete with an older receipt handle "will still
succeed, but the message might not be deleted", and moto accepts any handle
it ever issued, deleting or hiding the message under whichever worker holds
it now. So each delivery is fenced here, in the process that holds it:

- its deadline is the moment its receive was *sent* plus the lease, less a
  margin (a tenth of the lease, at most 5 s): SQS starts the visibility
  timeout after that moment, so the deadline is always before SQS's end;
- a delete, a visibility change or a failed record is sent only before the
  deadline; after it the settle is `LeaseLost`, and SQS, which by then may
  have handed the job to another worker, hears nothing;
- a renewal moves the deadline to the moment it was sent plus the lease,
  less the margin, once SQS has confirmed it; SQS holds a message at most
  12 hours from its receipt, and a renewal past that is `LeaseLost` too.

The guarantee: a worker that overran its lease never deletes, hides or
hands back the message another worker holds. The job itself may have run
twice, so jobs must tolerate a rerun, as on every driver.

SQS counts a visibility timeout in whole seconds; a lease of 300 ms is held
for 1 s. A delivery this process let lapse, whose SQS timeout has not ended
yet, is made visible again by the next reserve here (`returnable`), so a
lapsed lease comes back when the lease says, not a second later.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import timedelta

from ...errors import LeaseLost
from .settings import MAX_VISIBILITY

MOST_MARGIN = 5.0
SAFETY = 0.2
"""Seconds before SQS's own timeout ends after which a lapsed delivery is left to it: a
visibility change arriving later could reach the message under the next worker."""


def margin(lease: timedelta) -> float:
    return min(lease.total_seconds() / 10, MOST_MARGIN)


def visibility(lease: timedelta) -> int:
    """The visibility timeout (whole seconds) that holds a job for `lease`."""
    return max(1, math.ceil(lease.total_seconds()))


@dataclass(slots=True, eq=False)
class Delivery:
    """One receipt of a message, as the reservation's handle: never its payload."""

    queue: str
    url: str
    receipt: str
    message_id: str
    body: str
    sent: float
    """`time.monotonic()` when the receive that got it was sent."""
    lease: float = 0.0
    deadline: float = 0.0
    """`time.monotonic()` after which nothing is sent for it."""
    hidden_until: float = 0.0
    """`time.monotonic()` before which SQS certainly still hides it (its own timeout)."""
    extra: dict[str, str] = field(default_factory=dict)


class Ledger:
    """The deliveries this process holds, by reservation token, each with its deadline."""

    def __init__(self) -> None:
        self._held: dict[str, Delivery] = {}

    def hold(self, token: str, delivery: Delivery, lease: timedelta) -> float:
        """Record `delivery` under `token`; its deadline (monotonic) is returned."""
        delivery.lease = lease.total_seconds()
        delivery.deadline = delivery.sent + delivery.lease - margin(lease)
        delivery.hidden_until = delivery.sent + visibility(lease)
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
            raise LeaseLost(
                f"job {job_id}: its lease ran out (less its margin), so another worker may "
                "hold it now; nothing was sent to SQS for this delivery"
            )
        return delivery

    def check_renewable(self, token: str, job_id: str) -> Delivery:
        """`current`, and `LeaseLost` when a renewal would hold it past SQS's 12 hours."""
        delivery = self.current(token, job_id)
        if time.monotonic() + delivery.lease - delivery.sent > MAX_VISIBILITY.total_seconds():
            raise LeaseLost(
                f"job {job_id} has been held for nearly 12 hours, the longest SQS hides a "
                "message from its receipt, so its lease cannot be renewed again: it comes back "
                "for another worker when this lease ends. Split a job that runs this long, or "
                "run it on a driver without this limit"
            )
        return delivery

    def renewed(self, token: str, sent: float) -> None:
        """A renewal sent at `sent` was confirmed: the deadline moves from then."""
        delivery = self._held.get(token)
        if delivery is not None:
            lease = timedelta(seconds=delivery.lease)
            delivery.deadline = sent + delivery.lease - margin(lease)
            delivery.hidden_until = sent + visibility(lease)

    def done(self, token: str) -> None:
        self._held.pop(token, None)

    def held(self, queue: str) -> list[Delivery]:
        return [d for d in self._held.values() if d.queue == queue]

    def returnable(self) -> list[Delivery]:
        """Lapsed deliveries SQS still hides: forgotten here, for the caller to make visible.

        Those whose SQS timeout ended (or is about to) are forgotten too, left to SQS.
        """
        now = time.monotonic()
        back: list[Delivery] = []
        for token, delivery in list(self._held.items()):
            lease_end = delivery.deadline + margin(timedelta(seconds=delivery.lease))
            if now < lease_end:
                continue
            del self._held[token]
            if now < delivery.hidden_until - SAFETY:
                back.append(delivery)
        return back


__all__ = ["Delivery", "Ledger", "margin", "visibility"]
