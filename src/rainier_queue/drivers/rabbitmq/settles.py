# SPDX-License-Identifier: MIT
"""Settles lost with their channel, kept so the job is settled, not run again, when it returns.

AMQP 0-9-1 cannot acknowledge a delivery once the channel that carried it is
gone (a lost connection, a broker restart): the broker has put the job back
and will hand it out again. A job that finished while its channel was down
would then run a second time. So a queue object remembers the jobs it
finished and could not acknowledge, and when the broker hands one of them
back to it, acknowledges that delivery without handing it out.

This only helps when the job comes back to the same worker process; one
taken by another worker runs again, as at-least-once delivery allows. The
memory is bounded (the oldest forgotten first) and lives as long as the
process.
"""

from __future__ import annotations

from collections import OrderedDict

MOST_KEPT = 10_000
"""How many lost settles a queue object remembers at most."""


class LostSettles:
    """Job ids whose acknowledgement was lost with their channel."""

    def __init__(self) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()

    def keep(self, job_id: str) -> None:
        self._ids[job_id] = None
        self._ids.move_to_end(job_id)
        while len(self._ids) > MOST_KEPT:
            self._ids.popitem(last=False)

    def claim(self, job_id: str) -> bool:
        """Whether `job_id` finished here already (forgotten once claimed)."""
        return self._ids.pop(job_id, 0) is None

    def __len__(self) -> int:
        return len(self._ids)


__all__ = ["MOST_KEPT", "LostSettles"]
