# SPDX-License-Identifier: MIT
"""How job rows reach MySQL: multi-row `INSERT`s built here, as big as the server takes.

A bulk push to MySQL is CPU-bound in the client, not in the server:
aiomysql's `executemany` turns each value into SQL text through a chain of
generic per-value calls (eleven a job), and that, not the server's insert,
was where most of a push's time went. The values of a job row are of four
known kinds (text, whole number, `NULL`, and text that may be `NULL`), so
each is written here directly, text through one `str.translate`.

Escaping with backslashes is right because every pooled connection runs
with a `sql_mode` we set ourselves (`_mysql._SQL_MODE`), which does not
include `NO_BACKSLASH_ESCAPES`, and in utf8mb4, where no multi-byte
character can end in a quote or backslash byte.

What a push keeps:

- **All or nothing.** A big batch is split into statements that each fit
  the server's `max_allowed_packet`, all inside one transaction, so a
  failure writes none of them.
- **Due times on the server's clock.** The server's clock is read in the
  transaction's first round trip (with the packet limit), and each job's
  delay, measured on the caller's clock, is added to it: a web server whose
  clock runs ahead never holds jobs back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ...._clock import to_micros, utcnow
from ....envelope import QueuedJob, encode_headers, encode_payload
from ....job import ORDERING_KEY
from ..dialect import Session
from ..statements import PUSHED
from .connection import NOW_US

STATEMENT_LIMIT = 4 * 1024 * 1024
"""Most bytes of SQL in one statement, below the server's `max_allowed_packet`:
big enough that a thousand-job batch is one statement, small enough that the
server never holds much of a batch in its parser at once."""

_PACKET_MARGIN = 1024
"""Room left under `max_allowed_packet` for the protocol's own framing."""

_SPECIAL = {
    "\0": "\\0",
    "\n": "\\n",
    "\r": "\\r",
    "\x1a": "\\Z",
    "'": "\\'",
    '"': '\\"',
    "\\": "\\\\",
}
# A list, not a dict: `str.translate` indexes it (characters past its end are
# left as they are), several times faster than looking each one up.
_ESCAPES = [_SPECIAL.get(chr(code), chr(code)) for code in range(128)]

SETTINGS = f"SELECT {NOW_US}, @@max_allowed_packet"


def quote(text: str) -> str:
    """`text` as a MySQL string literal (backslash escapes, see the module docs)."""
    return "'" + text.translate(_ESCAPES) + "'"


def _row(job: QueuedJob, server_now: int, client_now: int) -> str:
    available = to_micros(job.available_at)
    created = available if job.created_at is job.available_at else to_micros(job.created_at)
    delay = available - client_now
    # Every text value escaped in place (not through `quote`): this runs per job.
    escapes = _ESCAPES
    key = "NULL" if job.unique_key is None else f"'{job.unique_key.translate(escapes)}'"
    ordering = job.headers.get(ORDERING_KEY)
    order = "NULL" if ordering is None else f"'{ordering.translate(escapes)}'"
    return (
        f"('{job.id.translate(escapes)}','{job.queue.translate(escapes)}',"
        f"'{job.name.translate(escapes)}','{encode_payload(job.payload).translate(escapes)}',"
        f"'{encode_headers(job.headers).translate(escapes)}',"
        f"{int(job.attempts)},{int(job.max_attempts)},{available},{created},{key},{order},"
        f"{server_now + delay if delay > 0 else server_now})"
    )


def statements(table: str, jobs: Sequence[QueuedJob], server_now: int, limit: int) -> Iterator[str]:
    """Multi-row INSERTs for `jobs`, in order, each at most `limit` bytes (or one row)."""
    head = f"INSERT INTO {table} ({PUSHED}, due_at) VALUES "
    client_now = to_micros(utcnow())
    rows: list[str] = []
    size = len(head)
    for job in jobs:
        row = _row(job, server_now, client_now)
        length = (len(row) if row.isascii() else len(row.encode())) + 1
        if rows and size + length > limit:
            yield head + ",".join(rows)
            rows, size = [], len(head)
        rows.append(row)
        size += length
    if rows:
        yield head + ",".join(rows)


async def insert_jobs(session: Session, table: str, jobs: Sequence[QueuedJob]) -> None:
    """Insert `jobs` in `session`'s transaction, in as few statements as the server allows."""
    clock, packet = (await session.fetchall(SETTINGS))[0]
    limit = min(STATEMENT_LIMIT, int(packet) - _PACKET_MARGIN)
    for statement in statements(table, jobs, int(clock), limit):
        await session.execute(statement)


__all__ = ["STATEMENT_LIMIT", "insert_jobs", "quote", "statements"]
