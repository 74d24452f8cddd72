# SPDX-License-Identifier: MIT
"""The database queue's SQL, written once in portable SQL and built per prefix and dialect.

Every settle names the row by job id *and* reservation token, so a worker
whose lease lapsed (and whose job another worker took) changes nothing: its
statement matches no row, and the queue says `LeaseLost`. No statement
reads a row and writes it back from Python, so no lost update is possible
between two workers either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from .dialect import Dialect
from .schema import Tables

ENVELOPE = (
    "id, queue, name, payload, headers, attempts, max_attempts, available_at, created_at, "
    "unique_key"
)
"""The envelope's columns, in the order `job_from_row` reads them."""

PUSHED = f"{ENVELOPE}, ordering_key"
"""The columns a push writes before `due_at`: the envelope's, and its ordering key (the
`rq-ordering-key` header, or NULL), which the claim keeps the order of."""

KEPT = f"{ENVELOPE}, ordering_key"
"""The columns a failed row keeps from its job row (then error, failed_at)."""

UNLEASED = "(lease_until IS NULL OR lease_until <= ?)"
"""No lease holds the row at `?`: it was never claimed, was released, or its lease lapsed."""

CLAIMABLE_AT = "CASE WHEN lease_until > due_at THEN lease_until ELSE due_at END"
"""When a row can next be claimed: the later of its due time and its lease's end."""


def in_order(jobs: str, row: str, now: str, *, held_index: bool = True) -> str:
    """SQL true when the row `row` (an alias of `jobs`) may run now as far as its ordering key
    goes: it has none, or no earlier row of its key is still in the table (waiting, delayed
    or reserved) and no row of its key holds a lease at `now`.

    An earlier row blocks whatever it is doing, so a retry released with a backoff (its row
    kept, due later) still holds its key; a job that succeeds or fails leaves the table, and
    the next of its key goes. A later row that holds a lease (two producers' pushes that
    committed out of order) blocks too, so a key never has two jobs running; its lease, once
    lapsed, stops blocking, so the two never wait on each other for ever.

    Each test is one probe of an index that holds keyed rows only: the first the range of the
    key before `row` in `jobs_ordering`, the second the key's entries in `jobs_held` (a
    reserved row's `held_key`). Without `held_index` (MySQL, which has no partial index and
    so no `jobs_held`) the second probes the key's rows in `jobs_ordering`. A row without a
    key pays the one `IS NULL`. (The `IS NOT NULL`s let PostgreSQL and SQLite use those
    indexes: they cannot tell on their own that `=` a column of the outer row implies them.)
    """
    key = f"{row}.ordering_key"
    same_key = (
        f"SELECT 1 FROM {jobs} AS e WHERE e.ordering_key IS NOT NULL AND e.ordering_key = {key}"
    )
    holder = (
        f"SELECT 1 FROM {jobs} AS e WHERE e.held_key IS NOT NULL AND e.held_key = {key}"
        if held_index
        else f"{same_key} AND e.held_key IS NOT NULL"
    )
    return (
        f"({key} IS NULL OR (NOT EXISTS ({same_key} AND e.seq < {row}.seq) "
        f"AND NOT EXISTS ({holder} AND e.lease_until > {now})))"
    )


HELD = "held_key = ordering_key"
"""What a claim sets besides its lease, so the claimed row holds its ordering key (a row
without one keeps NULL, which PostgreSQL counts as no change: the claim stays HOT)."""

LET_GO = "held_key = NULL"
"""What a release sets besides clearing its lease: the row no longer holds its key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Statements:
    """Each statement the queue runs, ready for its dialect."""

    push: str
    select_due: str
    claim: str
    acknowledge: str
    release: str
    renew: str
    record_failure: str
    quarantine: str
    """Move a claimed row that is not a job into the failed table as it is stored."""
    quarantine_delete: str
    quarantine_locked: str
    """`quarantine` for a row this transaction holds locked and has not claimed."""
    quarantine_locked_delete: str
    size: str
    counts: str
    """Waiting, delayed and reserved jobs of a queue, and the soonest delayed or lease end."""
    oldest_due: str
    """When the queue's longest-waiting free job fell due (`OldestWaiting`)."""
    clear: str
    failed_all: str
    failed_on_queue: str
    newest_failed: str
    restore_failed: str
    forget_failed: str
    flush_all: str
    flush_queue: str
    soonest_due: str
    """Template with `{marks}` for the `?, ?, ...` of the queue names."""

    @classmethod
    def build(cls, tables: Tables, dialect: Dialect) -> Self:
        jobs, failed = tables.jobs, tables.failed
        held = dialect.partial_indexes
        fenced = "WHERE id = ? AND reservation_token = ?"
        failed_list = f"SELECT {ENVELOPE}, error, failed_at FROM {failed}"
        raw = {
            "push": f"INSERT INTO {jobs} ({PUSHED}, due_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            # The first *due* rows, not simply the first: a delayed job at the
            # head must not block the ones behind it, nor a reserved one (its
            # lease not yet over). Lapsed leases are due again.
            # A row behind an earlier one of its ordering key is passed over.
            "select_due": f"SELECT seq, {ENVELOPE} FROM {jobs} AS j WHERE queue = ? "
            f"AND due_at <= ? AND {UNLEASED} AND {in_order(jobs, 'j', '?', held_index=held)} "
            f"ORDER BY due_at, seq LIMIT ? {dialect.claim_suffix}".rstrip(),
            # Only columns outside every index (and `held_key`, for a keyed row alone):
            # no index entry is written.
            "claim": f"UPDATE {jobs} SET attempts = attempts + 1, reservation_token = ?, "
            f"reserved_at = ?, lease_until = ?, {HELD} WHERE seq = ?",
            "acknowledge": f"DELETE FROM {jobs} {fenced}",
            "release": f"UPDATE {jobs} SET reservation_token = NULL, reserved_at = NULL, "
            f"lease_until = NULL, {LET_GO}, available_at = ?, due_at = ?, "
            "attempts = CASE WHEN attempts >= ? THEN attempts - ? ELSE 0 END "
            f"{fenced}",
            "renew": f"UPDATE {jobs} SET lease_until = ? {fenced}",
            # Copied row to row inside the database: the failed record is the
            # job exactly as stored, and it is written only if the token matches.
            "record_failure": f"INSERT INTO {failed} ({KEPT}, error, failed_at) "
            f"SELECT {KEPT}, ?, ? FROM {jobs} {fenced}",
            # A row that is not a job is named by its seq (its id may be unusable)
            # and by the token its claim just wrote, and copied byte for byte.
            "quarantine": f"INSERT INTO {failed} ({KEPT}, error, failed_at) "
            f"SELECT {KEPT}, ?, ? FROM {jobs} WHERE seq = ? AND reservation_token = ?",
            "quarantine_delete": f"DELETE FROM {jobs} WHERE seq = ? AND reservation_token = ?",
            "quarantine_locked": f"INSERT INTO {failed} ({KEPT}, error, failed_at) "
            f"SELECT {KEPT}, ?, ? FROM {jobs} WHERE seq = ?",
            "quarantine_locked_delete": f"DELETE FROM {jobs} WHERE seq = ?",
            "size": f"SELECT COUNT(*) FROM {jobs} WHERE queue = ? AND reservation_token IS NULL",
            # A reserved row is next claimable when its lease ends; a free one, when due.
            "counts": "SELECT "
            f"{_count('reservation_token IS NULL AND due_at <= ?')}, "
            f"{_count('reservation_token IS NULL AND due_at > ?')}, "
            f"{_count('reservation_token IS NOT NULL')}, "
            f"MIN(CASE WHEN reservation_token IS NOT NULL OR due_at > ? THEN {CLAIMABLE_AT} END) "
            f"FROM {jobs} WHERE queue = ?",
            "oldest_due": f"SELECT MIN(due_at) FROM {jobs} "
            "WHERE queue = ? AND reservation_token IS NULL AND due_at <= ?",
            "clear": f"DELETE FROM {jobs} WHERE queue = ? AND reservation_token IS NULL",
            "failed_all": f"{failed_list} ORDER BY failed_at DESC, seq DESC LIMIT ?",
            "failed_on_queue": f"{failed_list} WHERE queue = ? "
            "ORDER BY failed_at DESC, seq DESC LIMIT ?",
            "newest_failed": f"SELECT seq, queue FROM {failed} WHERE id = ? "
            "ORDER BY failed_at DESC, seq DESC LIMIT 1",
            # A retried job starts over (attempts 0, due now) and keeps the rest
            # of its envelope, max_attempts included, but not its uniqueness
            # key: that lock was given back when the job failed, and a fresh
            # dispatch may hold it now. If the job is somehow queued already,
            # it is not queued twice. Its ordering key comes back with it: it
            # joins the end of its key's line.
            "restore_failed": f"INSERT INTO {jobs} ({PUSHED}, due_at) "
            "SELECT id, queue, name, payload, headers, 0, max_attempts, ?, created_at, "
            f"NULL, ordering_key, ? FROM {failed} WHERE seq = ? "
            f"AND NOT EXISTS (SELECT 1 FROM {jobs} WHERE id = ?)",
            "forget_failed": f"DELETE FROM {failed} WHERE id = ?",
            "flush_all": f"DELETE FROM {failed}",
            "flush_queue": f"DELETE FROM {failed} WHERE queue = ?",
        }
        converted = {key: dialect.sql(text) for key, text in raw.items()}
        soonest = soonest_sql(jobs, "?", "IN ({marks})", held_index=held)
        return cls(**converted, soonest_due=soonest)

    def soonest_due_for(self, dialect: Dialect, count: int) -> str:
        """`soonest_due` for `count` queue names."""
        return dialect.sql(self.soonest_due.format(marks=", ".join(["?"] * count)))

    @staticmethod
    def soonest_due_params(queues: Sequence[str], now: int) -> tuple[object, ...]:
        """The parameters of `soonest_due_for(len(queues))`, read at `now`."""
        return (*queues, now, now, now, now, *queues, now, *queues, now)


def soonest_sql(jobs: str, now: str, queues: str, *, held_index: bool = True) -> str:
    """When the soonest of `queues`' rows is claimable; `now` itself if one is already.

    `now` and `queues` are SQL: a placeholder (or the server's clock), and the
    test on `queue` (`IN (...)`); `held_index` is `in_order`'s. A claimable row is
    looked for first, so a backlog costs one index probe; with none, every row due
    by `now` is reserved (the rows in flight, few), and the answer is the soonest of
    their lease ends and of the delayed rows' due times (the first entry past `now`
    in the index).
    A row waiting behind an earlier one of its ordering key is not claimable, so an
    idle worker does not spin on it; it is found by the next look once its key frees.
    """
    return (
        f"SELECT CASE WHEN EXISTS (SELECT 1 FROM {jobs} AS j WHERE queue {queues} "
        f"AND due_at <= {now} AND {UNLEASED.replace('?', now)} "
        f"AND {in_order(jobs, 'j', now, held_index=held_index)}) THEN {now} "
        "ELSE (SELECT MIN(t) FROM ("
        f"SELECT MIN(due_at) AS t FROM {jobs} WHERE queue {queues} AND due_at > {now} "
        f"UNION ALL SELECT MIN(lease_until) AS t FROM {jobs} WHERE queue {queues} "
        f"AND due_at <= {now}) AS soonest) END"
    )


def _count(condition: str) -> str:
    """SQL counting the rows that meet `condition` (0, not NULL, over no rows)."""
    return f"COALESCE(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END), 0)"
