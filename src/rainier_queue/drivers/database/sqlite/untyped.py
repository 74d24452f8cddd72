# SPDX-License-Identifier: MIT
"""Rows whose times are not numbers: found cheaply, made claimable, and said so.

SQLite keeps whatever a writer gives it. A program other than this library
that writes `due_at = 'tomorrow'` (or a blob) into the jobs table leaves a
row that no claim ever finds: SQLite orders every number before every text
and blob, so `due_at <= now` is never true for it, and the job would wait
forever without a word. Text in `lease_until` does the same to a claimed
row: its lease never ends. PostgreSQL and MySQL refuse such a write, since
their columns are typed; SQLite could only refuse it with a trigger, which
costs every push about 7 µs of CPU (three times a row's own insert, measured
with 500,000 rows), so it is not refused here but repaired where it is met.

An idle worker, before each wait, and anyone counting a queue (a draining
worker deciding whether to stop, `rainier-queue size`) ask two cheap questions: whether any row
of its queues has a due time that sorts as text (`due_at >= ''`, a seek in
the `(queue, due_at, seq)` index that finds nothing in a healthy table), and
whether any row due by now has a lease end that is not a number (only the
rows in flight are due by now when a worker is idle, so that scan is short).
A row found is made due at its own `available_at` (or now, if that is not a
number either), a broken lease is released, and a warning names the rows.
The envelope itself is then read as any other row is: a malformed one ends
in the failed table with the column named.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..dialect import Session

log = logging.getLogger("rainier_queue.sqlite")

NAMED = 10
"""How many of the repaired rows' ids the warning names."""

_NUMBER = "('integer', 'real')"


class UntypedTimes:
    """The probe and the repair for one jobs table, for any list of queues."""

    def __init__(self, jobs: str) -> None:
        self._jobs = jobs

    def _in(self, queues: Sequence[str]) -> str:
        return f"queue IN ({', '.join('?' * len(queues))})"

    def probe_sql(self, queues: Sequence[str]) -> str:
        """One read: whether a due time sorts as text, and whether a due row's lease end does."""
        where = self._in(queues)
        return (
            f"SELECT EXISTS (SELECT 1 FROM {self._jobs} WHERE {where} AND due_at >= ''), "
            f"EXISTS (SELECT 1 FROM {self._jobs} WHERE {where} AND due_at <= ? "
            "AND lease_until >= '')"
        )

    async def found(self, session: Session, queues: Sequence[str], now: int) -> bool:
        """Whether a row of `queues` needs `repair`."""
        rows = await session.fetchall(self.probe_sql(queues), (*queues, *queues, now))
        return bool(rows) and any(rows[0])

    async def repair(self, session: Session, queues: Sequence[str], now: int) -> list[str]:
        """Make every such row of `queues` claimable; the ids of those changed."""
        where = self._in(queues)
        due = f"{where} AND due_at >= ''"
        lease = f"{where} AND due_at <= ? AND lease_until >= ''"
        ids = [
            str(row[0])
            for row in await session.fetchall(
                f"SELECT id FROM {self._jobs} WHERE ({due}) OR ({lease})", (*queues, *queues, now)
            )
        ]
        # No claim of this library's takes a row whose due time is text, so a
        # token on one came from elsewhere: it is dropped with the due time.
        await session.execute(
            f"UPDATE {self._jobs} SET due_at = CASE WHEN typeof(available_at) IN {_NUMBER} "
            "THEN available_at ELSE ? END, lease_until = NULL, reservation_token = NULL, "
            f"held_key = NULL, reserved_at = NULL WHERE {due}",
            (now, *queues),
        )
        # A lease that cannot end is dropped: the row is released, as if never claimed.
        await session.execute(
            f"UPDATE {self._jobs} SET lease_until = NULL, reservation_token = NULL, "
            f"held_key = NULL, reserved_at = NULL WHERE {lease}",
            (*queues, now),
        )
        return ids


def warn_repaired(path: str, ids: Sequence[str]) -> None:
    """Say which rows had times that were not numbers, and what was done with them."""
    named = ", ".join(ids[:NAMED]) + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")
    log.warning(
        "%s: %d job row(s) had a due time or lease end that is not a number (written by "
        "another program?), which no worker would ever have found due: %s. They are due now "
        "(at their available_at), and a lease that could not end was released. Write "
        "microseconds since the epoch, as integers, into due_at and lease_until.",
        path,
        len(ids),
        named,
    )


__all__ = ["UntypedTimes", "warn_repaired"]
