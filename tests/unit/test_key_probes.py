# SPDX-License-Identifier: MIT
"""Each ordering-key probe of the claim finds its rows through an index the schema has.

The claim asks two questions of a keyed row (`statements.in_order`): is an earlier row of
its key still there, and does a row of its key hold a lease. Each is a subquery that looks
rows up by one column equal to the row's key. If no index of that dialect's schema starts
with that column, the subquery reads the whole table, once per keyed row the claim looks
at. The schema is what the migrations leave for each dialect (an index created and later
dropped does not count), read from the migrations themselves.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from rainier_queue.drivers.database import schema
from rainier_queue.drivers.database.dialect import Dialect
from rainier_queue.drivers.database.mysql.queue import MySQLDialect
from rainier_queue.drivers.database.postgres.dialect import PostgresDialect
from rainier_queue.drivers.database.sqlite.queue import SQLiteDialect
from rainier_queue.drivers.database.statements import in_order, soonest_sql

TABLES = schema.Tables("t_")
CREATED = re.compile(r"CREATE (?:UNIQUE )?INDEX (\w+) ON (\S+) \((\w+)")
DROPPED = re.compile(r"DROP INDEX (?:IF EXISTS )?(?:\w+\.)?(\w+)")
PROBE = re.compile(r"e\.(\w+) = j\.ordering_key")


def leading_columns(dialect: type[Dialect]) -> set[str]:
    """The first column of every index on the jobs table once every migration has run."""
    indexes: dict[str, str] = {}
    for migration in schema.MIGRATIONS:
        for statement in migration.render(TABLES, dialect):  # type: ignore[arg-type]
            if made := CREATED.search(statement):
                name, table, column = made.groups()
                if table == TABLES.jobs:
                    indexes[name] = column
            elif gone := DROPPED.search(statement):
                indexes.pop(gone.group(1), None)
    return {"seq", *indexes.values()}  # seq: the primary key


@pytest.mark.parametrize("dialect", [SQLiteDialect, PostgresDialect, MySQLDialect])
@pytest.mark.parametrize("where", ["claim", "idle wait"])
def test_every_key_probe_of_a_dialect_starts_an_index_of_its_schema(
    dialect: type[Dialect], where: str
) -> None:
    held: Any = dialect.partial_indexes
    sql = (
        in_order(TABLES.jobs, "j", "?", held_index=held)
        if where == "claim"
        else soonest_sql(TABLES.jobs, "?", "IN (?)", held_index=held)
    )
    probed = PROBE.findall(sql)
    assert len(probed) == 2, sql  # an earlier row of the key; a row holding it
    indexed = leading_columns(dialect)
    for column in probed:
        assert column in indexed, (
            f"{dialect.name} looks up rows by {column}, which starts none of its "
            f"indexes ({sorted(indexed)}): a whole-table read per keyed row"
        )
