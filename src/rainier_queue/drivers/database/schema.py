# SPDX-License-Identifier: MIT
"""The database queue's tables, and the numbered migrations that create them.

A job pushed by last month's code is worked by this month's, so the tables
change only by numbered, append-only migrations, and the database records
which ones it has (`{prefix}schema_version`). `rainier-queue provision` applies
the missing ones; a queue opened with `migrate = true` (the default) does
the same on first use, so a fresh checkout just works.

Table names are built from a configurable prefix, and the prefix goes
straight into SQL text (a table name cannot be a bound parameter). So it is
checked against a plain identifier pattern before anything is built from
it: nothing a config file says can ever become SQL.

Migrations are written once for every dialect: column types are named
(`{key}`, `{bigint}`, ...) and each dialect says what they are. Never edit
a migration that has shipped; add the next one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self

from ...errors import ConfigurationError
from .dialect import Dialect, Session

DEFAULT_PREFIX = "rainier_"
"""Tables `rainier_jobs`, `rainier_failed_jobs` and `rainier_schema_version`, as upstream has."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def check_prefix(prefix: object) -> str:
    """`prefix` if it is a safe start for a table name; a `ConfigurationError` if not."""
    if not isinstance(prefix, str) or not _IDENTIFIER.fullmatch(prefix):
        raise ConfigurationError(
            f"the table prefix {prefix!r} is not an identifier: use letters, digits and "
            "underscores, starting with a letter or underscore, at most 40 characters "
            "(such as `rainier_` or `app_jobs_`)"
        )
    return prefix


def check_schema(schema: object) -> str | None:
    """`schema` if it is None or a safe schema name; a `ConfigurationError` if not."""
    if schema is None:
        return None
    if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
        raise ConfigurationError(
            f"the schema {schema!r} is not an identifier: use letters, digits and "
            "underscores, starting with a letter or underscore, at most 40 characters"
        )
    return schema


@dataclass(frozen=True, slots=True)
class Tables:
    """The queue's table names under one prefix (and, where the database has them, a schema)."""

    prefix: str
    schema: str | None = None
    """Qualifies the table names (`schema.prefix_jobs`); index names stay unqualified,
    since an index lives in its table's schema."""

    @classmethod
    def for_prefix(cls, prefix: object, schema: object = None) -> Self:
        """Names under `prefix` (and `schema`), once both are checked."""
        return cls(check_prefix(prefix), check_schema(schema))

    def qualified(self, name: str) -> str:
        """`name` in this schema, if there is one."""
        return f"{self.schema}.{name}" if self.schema else name

    @property
    def jobs(self) -> str:
        return self.qualified(f"{self.prefix}jobs")

    @property
    def failed(self) -> str:
        return self.qualified(f"{self.prefix}failed_jobs")

    @property
    def version(self) -> str:
        return self.qualified(f"{self.prefix}schema_version")

    @property
    def paused(self) -> str:
        """The paused queues (`rainier-queue pause`): a row per queue while it is paused."""
        return self.qualified(f"{self.prefix}paused_queues")

    @property
    def records(self) -> str:
        return self.qualified(f"{self.prefix}records")

    @property
    def batches(self) -> str:
        """A row of counters per batch (`batching.py`)."""
        return self.qualified(f"{self.prefix}batches")

    @property
    def batch_jobs(self) -> str:
        """The jobs of unfinished batches whose end is recorded, a row each."""
        return self.qualified(f"{self.prefix}batch_jobs")


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One numbered step. Its statements are templates over table names and column types."""

    version: int
    name: str
    statements: tuple[str, ...]
    only: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Statements run after `statements` on one dialect alone (by its `name`): storage
    settings that have no portable spelling."""

    def render(self, tables: Tables, dialect: Dialect) -> list[str]:
        """The statements for `dialect`, with `tables`' names filled in."""
        names = {
            "prefix": tables.prefix,
            "index_prefix": tables.qualified(tables.prefix),
            "jobs": tables.jobs,
            "failed": tables.failed,
            "version": tables.version,
            "paused": tables.paused,
            "records": tables.records,
            "batches": tables.batches,
            "batch_jobs": tables.batch_jobs,
        }
        statements = self.statements + self.only.get(dialect.name, ())
        return [s.format(**names, **dialect.types) for s in statements]


# How a row is claimed. Until migration 3, `due_at` was its `available_at`
# while it waited and the end of its lease while it was reserved, so one
# index range scan found due jobs and lapsed leases alike. But a claim then
# moved an indexed column, and every claim wrote index entries (and, on
# PostgreSQL, could never be a HOT update).
#
# From migration 3 a claim leaves `due_at` alone and writes the lease's end
# into `lease_until`, which no index holds; the claim's index scan reads
# (queue, due_at, seq) as before and skips rows whose lease has not ended
# (`lease_until > now`). A lapsed lease makes the row claimable again, so
# still no reaper runs. Renewing writes `lease_until` alone; releasing
# writes a new `due_at` and clears `lease_until` (a retry changes when the
# job is due, which is what the index is for). A row is claimable when
# both `due_at` and `lease_until` (if set) have passed.
#
# Code from before migration 3 claims by moving `due_at` and knows nothing
# of `lease_until`: left running after the upgrade, it would take jobs that
# new workers hold. So the migration also makes the database refuse what
# only old code writes: a reserved row whose `lease_until` is missing or
# whose `due_at` lies after its `reserved_at` (an old claim or renewal). An
# old worker left running gets errors instead of other workers' jobs (a job
# it still holds is reclaimed once its lease ends, as after a crash); its
# pushes, acknowledgements and failures still work. Stop old workers before
# migrating all the same.
_ENVELOPE_COLUMNS = """
    id {key} NOT NULL,
    queue {key} NOT NULL,
    name {key} NOT NULL,
    payload {text} NOT NULL,
    headers {text} NOT NULL,
    attempts {int} NOT NULL,
    max_attempts {int} NOT NULL,
    available_at {bigint} NOT NULL,
    created_at {bigint} NOT NULL,
    unique_key {text}"""

_LEASED = "lease_until IS NOT NULL AND due_at <= reserved_at"
"""What every claim from migration 3 on leaves in a reserved row, and no older claim does:
a lease end in `lease_until`, and `due_at` untouched (so no later than the claim)."""

_OLD_CLAIMS_REFUSED = (
    "ALTER TABLE {jobs} ADD CONSTRAINT {prefix}jobs_leased "
    f"CHECK (reservation_token IS NULL OR ({_LEASED}))"
)

# Room on each page for a claimed row's new version, so the claim (which
# changes no indexed column from migration 3) can be a HOT update: no index
# entry written, and the old version pruned from the page without a VACUUM.
# A claim takes consecutive rows, often a whole page's, and each new version
# is a little bigger than the old (it carries the token), so a page needs
# about half its room free. Measured on 10,000 no-op jobs: 39% of claims HOT
# at the default 100, 64% at 70, 90% at 50; the cost is a waiting row taking
# twice the disk. Applies to pages written from then on.
_FILLFACTOR = "ALTER TABLE {jobs} SET (fillfactor = 50)"

_ORDERING_INDEX = "CREATE INDEX {prefix}jobs_ordering ON {jobs} (ordering_key, seq)"
_KEYED_ONLY = (
    _ORDERING_INDEX + " WHERE ordering_key IS NOT NULL",
    "CREATE INDEX {prefix}jobs_ordering_held ON {jobs} (ordering_key) "
    "WHERE ordering_key IS NOT NULL AND reservation_token IS NOT NULL",
)

# Which rows of a key hold it, for the claim's second key test. Migration 7 indexed
# them by a predicate on `reservation_token`; but PostgreSQL counts a column named
# anywhere in an index (its predicate too) against every update, so no claim, keyed or
# not, could be a HOT update any more: a million-job drain ran at about a twentieth of
# its speed. `held_key` is the row's ordering key while it is reserved and NULL otherwise:
# a claim of a row without a key leaves it NULL, which PostgreSQL sees as unchanged, so
# only claims of keyed rows write an entry (MySQL, with no partial index, probes the
# key's rows through `jobs_ordering` and leaves this column unindexed).
_HELD_INDEX = (
    "DROP INDEX IF EXISTS {index_prefix}jobs_ordering_held",
    "CREATE INDEX {prefix}jobs_held ON {jobs} (held_key) WHERE held_key IS NOT NULL",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="0001_jobs",
        statements=(
            "CREATE TABLE {jobs} (\n    seq {seq_pk},"
            + _ENVELOPE_COLUMNS
            + ",\n    reservation_token {key},\n    reserved_at {bigint},"
            "\n    due_at {bigint} NOT NULL\n)",
            "CREATE UNIQUE INDEX {prefix}jobs_id ON {jobs} (id)",
            "CREATE INDEX {prefix}jobs_due ON {jobs} (queue, due_at, seq)",
        ),
    ),
    Migration(
        version=2,
        name="0002_failed_jobs",
        statements=(
            # The whole envelope is kept, so a retry restores the job as it was
            # (its max_attempts, headers and unique key), not a shadow of it.
            "CREATE TABLE {failed} (\n    seq {seq_pk},"
            + _ENVELOPE_COLUMNS
            + ",\n    error {text} NOT NULL,\n    failed_at {bigint} NOT NULL\n)",
            "CREATE INDEX {prefix}failed_id ON {failed} (id)",
            "CREATE INDEX {prefix}failed_queue ON {failed} (queue, failed_at)",
        ),
    ),
    Migration(
        version=3,
        name="0003_lease_until",
        statements=(
            # Nullable with no default: on all three databases a new column
            # costs no rewrite of the table.
            "ALTER TABLE {jobs} ADD COLUMN lease_until {bigint}",
            # Rows reserved under the old scheme: their lease's end moves into
            # lease_until, and due_at goes back to when they were claimed (they
            # were due by then). lease_until is set first: MySQL assigns left
            # to right. Guarded, so a migration cut short (MySQL commits DDL
            # by itself) can run again.
            "UPDATE {jobs} SET lease_until = due_at, due_at = COALESCE(reserved_at, due_at) "
            "WHERE reservation_token IS NOT NULL AND lease_until IS NULL",
        ),
        only={
            # Code from before this migration claims by moving due_at and never
            # sets lease_until, so it would take rows that new workers hold.
            # Refuse such a claim instead, loudly: an old worker left running
            # through the upgrade gets errors, not another worker's jobs.
            "postgres": (_OLD_CLAIMS_REFUSED, _FILLFACTOR),
            "mysql": (_OLD_CLAIMS_REFUSED,),
            # SQLite cannot add a constraint to a table: a trigger says the same.
            "sqlite": (
                "CREATE TRIGGER IF NOT EXISTS {prefix}jobs_leased BEFORE UPDATE ON {jobs} "
                "WHEN NEW.reservation_token IS NOT NULL AND NOT ("
                + _LEASED.replace("lease_until", "NEW.lease_until")
                .replace("due_at", "NEW.due_at")
                .replace("reserved_at", "NEW.reserved_at")
                + ") BEGIN SELECT RAISE(ABORT, 'a claim or renewal by a worker older than "
                "schema version 3'); END",
            ),
        },
    ),
    Migration(
        version=4,
        name="0004_paused_queues",
        statements=(
            # A row per paused queue, read by every worker on a cadence (not per job),
            # so a table of a few rows is all it needs; no index beyond the key.
            "CREATE TABLE {paused} (\n    queue {key} NOT NULL PRIMARY KEY,"
            "\n    paused_at {bigint} NOT NULL\n)",
        ),
    ),
    Migration(
        version=5,
        name="0005_records",
        statements=(
            # Worker heartbeats, succeeded records and results (jobstate.py): a few
            # small rows with an expiry, read by name or by
            # the start of the name. Nothing on a job's path writes here unless asked.
            "CREATE TABLE {records} (\n    name {key} NOT NULL PRIMARY KEY,"
            "\n    body {text} NOT NULL,\n    expires_at {bigint} NOT NULL\n)",
            "CREATE INDEX {prefix}records_expiry ON {records} (expires_at)",
        ),
    ),
    Migration(
        version=6,
        name="0006_batches",
        statements=(
            # A batch is a row of counters, whatever its size; recording a job's end
            # reads and writes that row and one marker row, never the batch's list
            # (drivers/database/batching.py).
            "CREATE TABLE {batches} (\n    id {key} NOT NULL PRIMARY KEY,"
            "\n    total {bigint} NOT NULL,\n    succeeded {bigint} NOT NULL,"
            "\n    failed {bigint} NOT NULL,\n    cancelled {bigint} NOT NULL,"
            "\n    callbacks {text} NOT NULL,\n    created_at {bigint} NOT NULL,"
            "\n    finished_at {bigint}\n)",
            "CREATE INDEX {prefix}batches_finished ON {batches} (finished_at)",
            "CREATE TABLE {batch_jobs} (\n    batch_id {key} NOT NULL,"
            "\n    job_id {key} NOT NULL,\n    PRIMARY KEY (batch_id, job_id)\n)",
        ),
    ),
    Migration(
        version=7,
        name="0007_ordering_keys",
        statements=(
            # Nullable with no default: no rewrite of the table. The failed table keeps
            # the key too, so a retried job joins the end of its key's line.
            "ALTER TABLE {jobs} ADD COLUMN ordering_key {key}",
            "ALTER TABLE {failed} ADD COLUMN ordering_key {key}",
        ),
        only={
            # The claim asks, of a row with a key, whether an earlier row of that key
            # is still there, one probe of (ordering_key, seq), and whether one of its key
            # holds a lease, a probe of the key's reserved rows (by `held_key` from
            # migration 8, which drops the second index here). Rows without a key are
            # left out of both where the database can, so neither a push nor a claim of
            # one writes an entry (MySQL has no partial index: it probes the first for both).
            "postgres": _KEYED_ONLY,
            "sqlite": _KEYED_ONLY,
            "mysql": (_ORDERING_INDEX,),
        },
    ),
    Migration(
        version=8,
        name="0008_held_keys",
        statements=(
            "ALTER TABLE {jobs} ADD COLUMN held_key {key}",
            # Rows reserved by a worker from before: their key is held as before.
            "UPDATE {jobs} SET held_key = ordering_key "
            "WHERE ordering_key IS NOT NULL AND reservation_token IS NOT NULL",
        ),
        only={"postgres": _HELD_INDEX, "sqlite": _HELD_INDEX},
    ),
)

EXPECTED_VERSION = MIGRATIONS[-1].version


async def applied_version(session: Session, dialect: Dialect, tables: Tables) -> int:
    """The highest migration the database has; 0 when it has none (not even the table)."""
    if not await session.fetchall(dialect.sql(dialect.table_exists_sql), (tables.version,)):
        return 0
    rows = await session.fetchall(f"SELECT MAX(version) FROM {tables.version}")
    return int(rows[0][0] or 0) if rows else 0


async def applied_versions(session: Session, dialect: Dialect, tables: Tables) -> set[int]:
    """Every migration the database has; empty when it has none (not even the table)."""
    if not await session.fetchall(dialect.sql(dialect.table_exists_sql), (tables.version,)):
        return set()
    return {int(row[0]) for row in await session.fetchall(f"SELECT version FROM {tables.version}")}


def missing(applied: set[int]) -> list[Migration]:
    """The migrations not in `applied`, in order: a number below the highest applied can be
    missing (one shipped on another branch after a later one was applied), and is applied."""
    return [m for m in MIGRATIONS if m.version not in applied]


async def apply_pending(session: Session, dialect: Dialect, tables: Tables) -> list[str]:
    """Apply every migration the database lacks, in order; the names of those applied.

    Run inside one transaction, so a failure applies nothing and two
    processes migrating at once apply each step once. Versions may have gaps
    (they are numbered across branches); each missing one is applied, even
    below the highest the database has.
    """
    await dialect.lock_for_migration(session)
    await session.execute(
        f"CREATE TABLE IF NOT EXISTS {tables.version} (version {dialect.types['int']} "
        f"PRIMARY KEY, name {dialect.types['key']} NOT NULL, "
        f"applied_at {dialect.types['bigint']} NOT NULL)"
    )
    current = await applied_versions(session, dialect, tables)
    record = dialect.sql(
        f"INSERT INTO {tables.version} (version, name, applied_at) VALUES (?, ?, ?)"
    )
    applied: list[str] = []
    for migration in missing(current):
        for statement in migration.render(tables, dialect):
            await session.execute(statement)
        await session.execute(
            record, (migration.version, migration.name, await dialect.now(session))
        )
        applied.append(migration.name)
    return applied


__all__ = [
    "DEFAULT_PREFIX",
    "EXPECTED_VERSION",
    "MIGRATIONS",
    "Migration",
    "Tables",
    "apply_pending",
    "applied_version",
    "applied_versions",
    "missing",
    "check_prefix",
    "check_schema",
]
