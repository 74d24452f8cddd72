# SPDX-License-Identifier: MIT
"""Why the queue's connections plan each statement once, not once per execution.

A prepared statement gets a plan made for its actual parameters (a
"custom" plan) on each of its first five executions; after that PostgreSQL
keeps one plan made without them (the "generic" plan) only if that one
looks no dearer. For the claim, the two choices go wrong both ways:

- on a table with planner statistics, the generic plan never looks cheap
  enough, so every claim is planned again: 170-300 µs of server CPU per
  claim (the claim is a statement of four parts), more than running it
  when the batch is small. Measured with 20,000 jobs waiting: a claim and
  acknowledgement of 8 took 568 µs planned each time, 271 µs on the
  generic plan;
- on a table without statistics (new, or autovacuum off or behind), each
  custom plan fetches every due row by bitmap and sorts them, instead of
  walking the due index to the first few (see `statistics`): 10 ms a
  claim with 20,000 jobs waiting, and psycopg runs a statement five times
  unprepared before preparing it, on each pooled connection.

The queue's statements are all of one shape whatever their parameters (an
index range of one queue, rows by key), so the generic plan is the right
one for each. So the queue's own connections set `plan_cache_mode` to
`force_generic_plan`, and the claims are prepared on their first use.

They also turn JIT compilation off. A generic plan is costed without the
claim's `LIMIT` value, as if it returned a tenth of the due rows: on a table
of a million jobs the claim's estimate passed `jit_above_cost`, and the
server compiled it to machine code on every execution, 25 ms of CPU for a
statement that runs in 1 to 2 ms. A drain of a million-job backlog ran at
about 1,000 jobs/s instead of 20,000. No statement of the queue's reads
enough rows for JIT to pay.

None of this applies with prepared statements turned off (PgBouncer in
transaction mode, where a session setting would leak to other clients):
there each statement is planned for its parameters, every time, and costed
with its `LIMIT`, far under the JIT threshold.
"""

from __future__ import annotations

from typing import Any

import psycopg

PLAN_SETTINGS = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), "
    "set_config('jit', 'off', false)"
)
FIRST_SERVER_WITH_IT = 120_000
"""`plan_cache_mode` is PostgreSQL 12's (and `jit` 11's)."""


async def plan_once(conn: psycopg.AsyncConnection[Any]) -> None:
    """Make `conn` keep one plan per prepared statement, and never JIT-compile one (see the
    module docs)."""
    if conn.info.server_version >= FIRST_SERVER_WITH_IT:
        await conn.execute(PLAN_SETTINGS)


__all__ = ["PLAN_SETTINGS", "plan_once"]
