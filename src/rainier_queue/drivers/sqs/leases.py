# SPDX-License-Identifier: MIT
"""SQS's side of the driver's fencing: its 12 hours, whole seconds, and lapsed leases handed back.

SQS does not fence. A delete with an older receipt handle "will still
succeed, but the message might not be deleted", and moto accepts any handle
it ever issued, deleting or hiding the message under whichever worker holds
it now. So every delivery is held in the toolkit's ledger (drivers/fencing.py,
which says what it guarantees), and a delete, a visibility change or a
failed record is sent only before its deadline. What SQS adds is here:

- a delivery's lease runs from the moment its receive was *sent*: SQS starts
  the visibility timeout after that, so the deadline is always before SQS's
  end;
- SQS holds a message at most 12 hours from its receipt, and a renewal past
  that is `LeaseLost` (`check_renewable`);
- SQS counts a visibility timeout in whole seconds; a lease of 300 ms is
  held for 1 s. A delivery this process let lapse, whose SQS timeout has not
  ended yet, is made visible again by the next reserve here (`returnable`),
  so a lapsed lease comes back when the lease says, not a second later. So a
  lapsed delivery stays in the ledger until then (`keep_lapsed`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import timedelta

from ...errors import LeaseLost
from ..fencing import Ledger, margin
from .settings import MAX_VISIBILITY

SAFETY = 0.2
"""Seconds before SQS's own timeout ends after which a lapsed delivery is left to it: a
visibility change arriving later could reach the message under the next worker."""


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


class SQSLedger(Ledger[Delivery]):
    """The toolkit's ledger, with SQS's cap on renewals and its lapsed deliveries handed back."""

    def __init__(self) -> None:
        super().__init__("SQS", keep_lapsed=True)

    def hold(self, token: str, delivery: Delivery, started: float, lease: timedelta) -> float:
        """Hold `delivery`, its lease counted from `started`: when its receive was sent."""
        delivery.hidden_until = started + visibility(lease)
        return super().hold(token, delivery, started, lease)

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

    def renewed(self, token: str, sent: float) -> float | None:
        """A renewal sent at `sent` was confirmed: the deadline, and SQS's own end, move."""
        delivery = self.get(token)
        if delivery is not None:
            delivery.hidden_until = sent + visibility(timedelta(seconds=delivery.lease))
        return super().renewed(token, sent)

    def returnable(self) -> list[Delivery]:
        """Lapsed deliveries SQS still hides: forgotten here, for the caller to make visible.

        Those whose SQS timeout ended (or is about to) are forgotten too, left to SQS.
        """
        now = time.monotonic()
        back: list[Delivery] = []
        for token, delivery in self.tokens():
            lease_end = delivery.deadline + margin(timedelta(seconds=delivery.lease))
            if now < lease_end:
                continue
            self.done(token)
            if now < delivery.hidden_until - SAFETY:
                back.append(delivery)
        return back


__all__ = ["Delivery", "SQSLedger", "visibility"]
