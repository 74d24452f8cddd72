# SPDX-License-Identifier: MIT
"""The statements the PostgreSQL queue runs where portable SQL would take several.

PostgreSQL can claim, settle and record a failure each in one statement
(data-modifying CTEs, `RETURNING`, `unnest` of arrays), and a busy worker's
acknowledgements and next claim in one more; these are kept apart from the
driver's code so each can be read, and tested, as SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from ..schema import Tables
from ..statements import ENVELOPE, HELD, KEPT, LET_GO, UNLEASED, in_order, soonest_sql
from .connection import NOW_US


@dataclass(frozen=True, slots=True)
class PgStatements:
    """The statements PostgreSQL runs in one round trip where portable SQL takes several."""

    claim: str
    """Parameters: queue, the floor's due_at and seq (see `floor`), limit, lease."""
    acknowledge_many: str
    """Parameters: the rows' seqs (their reservations' handles) and their tokens."""
    acknowledge_many_by_id: str
    """`acknowledge_many` for reservations that do not carry their row's seq."""
    acknowledge_and_claim: str
    """`acknowledge_many` and `claim` as one statement; acknowledged rows come last, with
    NULL in every claim column and (id, token) at the end."""
    release: str
    renew: str
    fail: str
    soonest: str
    """Template with `{marks}` for the queue names, which are passed three times over."""

    @classmethod
    def build(cls, tables: Tables) -> Self:
        jobs = tables.jobs
        returned = ["j.seq", "picked.was_due", "j.lease_until", "j.reservation_token"] + [
            f"j.{c}" for c in ENVELOPE.split(", ")
        ]
        clock_and_pick = (
            f"clock AS (SELECT {NOW_US} AS now), "
            f"picked AS (SELECT seq, due_at AS was_due FROM {jobs} AS p "
            "WHERE queue = %s AND (due_at, seq) > (%s, %s) AND due_at <= (SELECT now FROM clock) "
            f"AND {UNLEASED.replace('?', '(SELECT now FROM clock)')} "
            f"AND {in_order(jobs, 'p', '(SELECT now FROM clock)')} "
            "ORDER BY due_at, seq LIMIT %s FOR UPDATE OF p SKIP LOCKED)"
        )
        # No indexed column changes (but `held_key`, of a keyed row alone), so with
        # room on the page (the table's fillfactor) the update is HOT: no index
        # entry is written.
        update = (
            f"UPDATE {jobs} AS j SET attempts = j.attempts + 1, "
            "reservation_token = replace(gen_random_uuid()::text, '-', ''), "
            f"reserved_at = clock.now, lease_until = clock.now + %s, {HELD} "
            "FROM picked, clock WHERE j.seq = picked.seq "
            f"RETURNING {', '.join(returned)}"
        )
        # Rows named by seq, not id (see `acks`).
        delete = (
            f"DELETE FROM {jobs} AS j USING unnest(%s::bigint[], %s::text[]) "
            "AS s(seq, token) WHERE j.seq = s.seq AND j.reservation_token = s.token "
            "RETURNING j.id, j.reservation_token"
        )
        delete_by_id = (
            f"DELETE FROM {jobs} AS j USING unnest(%s::text[], %s::text[]) "
            "AS s(id, token) WHERE j.id = s.id AND j.reservation_token = s.token "
            "RETURNING j.id, j.reservation_token"
        )
        return cls(
            claim=f"WITH {clock_and_pick} {update}",
            acknowledge_many=delete,
            acknowledge_many_by_id=delete_by_id,
            # One statement, so one commit: the acknowledgements and the claim
            # land together or not at all. The rows being acknowledged are
            # reserved (due later), so the claim could not pick them anyway.
            acknowledge_and_claim=f"WITH acked AS ({delete}), {clock_and_pick}, "
            f"claimed AS ({update}) "
            "SELECT *, NULL, NULL FROM claimed UNION ALL "
            f"SELECT {', '.join(['NULL'] * len(returned))}, id, reservation_token FROM acked",
            release=f"WITH clock AS (SELECT {NOW_US} AS now) UPDATE {jobs} SET "
            f"reservation_token = NULL, reserved_at = NULL, lease_until = NULL, {LET_GO}, "
            "available_at = clock.now + %s, due_at = clock.now + %s, "
            "attempts = CASE WHEN attempts >= %s THEN attempts - %s ELSE 0 END "
            "FROM clock WHERE id = %s AND reservation_token = %s",
            renew=f"UPDATE {jobs} SET lease_until = {NOW_US} + %s "
            "WHERE id = %s AND reservation_token = %s",
            # Removed and recorded in one statement, so atomically: the job is
            # in exactly one of the two tables, whatever happens.
            fail=f"WITH gone AS (DELETE FROM {jobs} WHERE id = %s AND reservation_token = %s "
            f"RETURNING {KEPT}) INSERT INTO {tables.failed} ({KEPT}, error, failed_at) "
            f"SELECT {KEPT}, %s, {NOW_US} FROM gone",
            soonest=f"WITH clock AS (SELECT {NOW_US} AS now) "
            f"SELECT ({soonest_sql(jobs, '(SELECT now FROM clock)', 'IN ({marks})')}), "
            "(SELECT now FROM clock)",
        )


__all__ = ["PgStatements"]
