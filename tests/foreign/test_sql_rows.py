# SPDX-License-Identifier: MIT
"""Rows written straight into the jobs table by other software, then worked by CLI workers.

The promise under test: whatever a foreign writer leaves in the table, a
worker neither exits nor stalls nor reruns other jobs because of it. Each
well-formed row runs exactly once, each malformed one ends in the failed
table with an error naming the field, and the queue drains to nothing.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pymysql  # type: ignore[import-untyped]
import pytest

from ..cli.harness import Cli, no_traceback
from ..mysql_service import SERVER, drop_tables
from ..mysql_service import check as require_mysql
from ..postgres import PG_URL, drop_prefixed, require_postgres
from .catalog import (
    GOOD_VARIANTS,
    NUL_BAD_ROWS,
    QUEUE,
    SQL_BAD_ROWS,
    SQLITE_BAD_ROWS,
    SQLITE_GOOD_VARIANTS,
    sql_row,
)
from .workers import drain_with_workers, failed_records

Insert = Callable[[str, list[dict[str, object]]], None]
"""Writes rows into the named jobs table, as a foreign program would."""

GOOD = 24


def _sqlite_writer(path: Path) -> Insert:
    def insert(table: str, rows: list[dict[str, object]]) -> None:
        with sqlite3.connect(path) as conn:
            for row in rows:
                columns = ", ".join(row)
                # A ("not-utf8", bytes) value is stored as TEXT holding those bytes.
                marks = ", ".join(
                    "CAST(? AS TEXT)" if isinstance(v, tuple) else "?" for v in row.values()
                )
                values = [v[1] if isinstance(v, tuple) else v for v in row.values()]
                conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", values)

    return insert


def _postgres_insert(table: str, rows: list[dict[str, object]]) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for row in rows:
            marks = ", ".join(["%s"] * len(row))
            conn.execute(
                f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})",
                list(row.values()),
            )


def _mysql_insert(table: str, rows: list[dict[str, object]]) -> None:
    conn = pymysql.connect(
        host="127.0.0.1", port=3306, user="root", database="test", autocommit=True
    )
    try:
        with conn.cursor() as cur:
            for row in rows:
                marks = ", ".join(["%s"] * len(row))
                cur.execute(
                    f"INSERT INTO `{table}` ({', '.join(row)}) VALUES ({marks})",
                    list(row.values()),
                )
    finally:
        conn.close()


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Insert]]:
    """(the CLI's URL, the jobs table's name, a foreign writer) for one database."""
    prefix = f"f{uuid.uuid4().hex[:10]}_"
    kind = request.param
    if kind == "sqlite":
        path = tmp_path / "jobs.db"
        yield f"sqlite:///{path}", "rainier_jobs", _sqlite_writer(path)
        return
    if kind == "postgres":
        require_postgres()
        yield f"{PG_URL}?prefix={prefix}", f"{prefix}jobs", _postgres_insert
        import asyncio

        asyncio.run(drop_prefixed(prefix))
        return
    require_mysql()
    yield f"{SERVER}?prefix={prefix}", f"{prefix}jobs", _mysql_insert
    import asyncio

    asyncio.run(drop_tables(prefix))


def test_malformed_rows_are_failed_with_the_field_named_and_every_good_row_runs_once(
    store: tuple[str, str, Insert], tmp_path: Path
) -> None:
    url, table, insert = store
    cli = Cli(url)
    migrated = cli("migrate")
    assert migrated.code == 0, migrated.output
    ledger = tmp_path / "ledger.txt"
    bad = dict(SQL_BAD_ROWS)
    if url.startswith("sqlite"):
        bad.update(SQLITE_BAD_ROWS)
    if not url.startswith("postgresql"):
        bad.update(NUL_BAD_ROWS)
    good_ids = [f"good-{i:02d}" for i in range(GOOD)]
    shapes = list(GOOD_VARIANTS.values())
    if url.startswith("sqlite"):
        shapes += SQLITE_GOOD_VARIANTS.values()
    variants = dict(zip(good_ids, shapes, strict=False))
    rows: list[dict[str, object]] = []
    # Bad rows first and between the good ones, so every claim batch meets some.
    bad_rows = [
        sql_row(f"bad-{name}", str(ledger), **changes) for name, (changes, _) in bad.items()
    ]
    for i, job_id in enumerate(good_ids):
        if i < len(bad_rows):
            rows.append(bad_rows[i])
        rows.append(sql_row(job_id, str(ledger), **variants.get(job_id, {})))
    rows += bad_rows[len(good_ids) :]
    insert(table, rows)

    results = drain_with_workers(cli, workers=2)

    for result in results:
        assert result.code == 0, result.output
        assert no_traceback(result), result.output
    assert ledger.exists(), [r.output for r in results]
    ran = Counter(ledger.read_text(encoding="utf-8").split())
    assert ran == Counter(good_ids), "each well-formed row runs exactly once"
    failed = {entry["id"]: entry for entry in failed_records(cli)}
    for name, (_, names) in bad.items():
        entry = failed.get(f"bad-{name}")
        assert entry is not None, f"bad-{name} is not in the failed store: {sorted(failed)}"
        assert names in entry["error"], entry["error"]
        assert entry["name"] == "rainier-queue:not-a-job"
    assert len(failed) == len(bad)
    assert cli.sizes(QUEUE) == {QUEUE: 0}
