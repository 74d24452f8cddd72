# SPDX-License-Identifier: MIT
"""Rewriting stored payloads in place, page by page: what `rainier-queue reencrypt` asks of SQL.

A row's payload is only ever written by its push, so a rewrite can run
beside busy workers: each page is read in one short transaction, the new
payloads are worked out outside any, and each row is written back only if
its payload is still the one that was read (a compare-and-set on `seq` and
the old text), so a row settled, retried or rewritten meanwhile is left as
it now is. Both tables are walked: the waiting, delayed and reserved jobs,
and the failed ones, which a retry would otherwise bring back under a key
that may be gone by then. A row that is not a job is skipped: it has no
payload to speak of, and the failed store already holds such rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from ...envelope import encode_payload
from ...envelope.reading import Malformed, read_columns
from ...queue import Rewrite
from .dialect import Row, Session, Work
from .statements import ENVELOPE

PAGE = 500
"""Rows read per transaction."""

_T = TypeVar("_T")


class Runs(Protocol):
    """`DatabaseQueue._run`: a unit of work in a transaction of its own."""

    async def __call__(self, work: Work[_T], *, write: bool = True, durable: bool = True) -> _T:
        """Run `work`."""
        ...


async def rewrite_table(run: Runs, sql: Callable[[str], str], table: str, rewrite: Rewrite) -> int:
    """Offer every row of `table` to `rewrite`, and store the payloads it changes."""
    select = sql(f"SELECT seq, {ENVELOPE} FROM {table} WHERE seq > ? ORDER BY seq LIMIT ?")
    update = sql(f"UPDATE {table} SET payload = ? WHERE seq = ? AND payload = ?")
    after: object = -1
    count = 0
    while True:
        rows = await run(_page(select, after), write=False)
        if not rows:
            return count
        changes: list[tuple[str, object, object]] = []
        for row in rows:
            job = read_columns(row[1:])
            if isinstance(job, Malformed):
                continue
            new = rewrite(job)
            if new is not None:
                changes.append((encode_payload(new.payload), row[0], row[4]))
        if changes:
            count += await run(_store(update, changes))
        after = rows[-1][0]


def _page(select: str, after: object) -> Work[list[Row]]:
    async def work(s: Session) -> list[Row]:
        return await s.fetchall(select, (after, PAGE))

    return work


def _store(update: str, changes: list[tuple[str, object, object]]) -> Work[int]:
    async def work(s: Session) -> int:
        done = 0
        for change in changes:
            done += await s.execute(update, change)
        return done

    return work
