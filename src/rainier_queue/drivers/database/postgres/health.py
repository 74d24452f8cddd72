# SPDX-License-Identifier: MIT
"""What `rainier-queue doctor` says about the settings of a PostgreSQL server.

A queue table lives differently from an ordinary one: its rows are
inserted and deleted all day, and a job accepted must not be lost. So
settings that are harmless elsewhere hurt here: a lazy commit loses
accepted jobs in a crash, and a table nobody vacuums keeps every dead row
and index entry, so the table and its indexes grow and every claim that
reads the queue from its head steps over the dead entries of every job
settled before it. And jobs carry data:
sent in the clear to a server on another machine, or over TLS to a server
whose certificate nobody checked, they can be read and changed on the way.

The settings are read in one query; turning them into sentences is a pure
function, so each rule is tested without reconfiguring a server (most of
them can be changed only for the whole server).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from ... import tls

SETTINGS_SQL = (
    "SELECT current_setting('synchronous_commit'), current_setting('fsync'), "
    "current_setting('autovacuum'), current_setting('track_counts'), "
    "(SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)), "
    "(SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), "
    "host(inet_server_addr())"
)
"""The settings `doctor` judges; its one parameter is the jobs table's name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The server's answers, as text, and the jobs table they concern."""

    jobs_table: str
    synchronous_commit: str = "on"
    fsync: str = "on"
    autovacuum: str = "on"
    track_counts: str = "on"
    table_options: tuple[str, ...] = ()
    """The jobs table's storage options (`pg_class.reloptions`), such as
    `autovacuum_enabled=false`."""
    encrypted: bool = False
    """Whether the connection `doctor` asked on speaks TLS."""
    server_address: str | None = None
    """The server's address on that connection; None over a Unix socket."""
    unverified: bool = False
    """Whether connections take the server's certificate unchecked (`insecure_skip_verify`)."""

    @classmethod
    def from_row(cls, jobs_table: str, row: Sequence[object], *, unverified: bool = False) -> Self:
        """From the one row `SETTINGS_SQL` returns."""
        synchronous_commit, fsync, autovacuum, track_counts, options, ssl, address = row
        listed = options if isinstance(options, list | tuple) else []
        return cls(
            jobs_table=jobs_table,
            synchronous_commit=str(synchronous_commit),
            fsync=str(fsync),
            autovacuum=str(autovacuum),
            track_counts=str(track_counts),
            table_options=tuple(str(option) for option in listed),
            encrypted=bool(ssl),
            server_address=None if address is None else str(address),
            unverified=unverified,
        )

    @property
    def table_autovacuum_off(self) -> bool:
        """Whether the jobs table itself opts out of autovacuum."""
        for option in self.table_options:
            name, _, value = option.partition("=")
            if name.strip().lower() == "autovacuum_enabled" and _is_off(value):
                return True
        return False


def warnings_for(settings: ServerSettings) -> list[str]:
    """Each setting that puts accepted jobs or the claim's speed at risk, as advice."""
    warnings: list[str] = []
    if settings.synchronous_commit == "off":
        warnings.append(
            "synchronous_commit is off: a push can return before its job is on disk, so a "
            "server crash can lose jobs that were accepted; set it to on for this database"
        )
    if _is_off(settings.fsync):
        warnings.append(
            "fsync is off: a server crash can lose or corrupt the jobs table; turn it on"
        )
    table = settings.jobs_table
    churn = (
        f"{table} has rows inserted and deleted all day; until it is vacuumed their dead "
        "versions and index entries stay, so the table and its indexes grow, and each claim "
        "that reads the queue from its head (an idle worker's, and one every few seconds in a "
        "busy one) steps over the dead entries of every job settled before it"
    )
    if _is_off(settings.autovacuum):
        warnings.append(
            f"autovacuum is off: {churn}. Turn it on (autovacuum = on in postgresql.conf, then "
            f"reload the server), or run VACUUM {table} every few minutes"
        )
        churn = "see above"
    elif _is_off(settings.track_counts):
        warnings.append(
            f"track_counts is off, so autovacuum cannot tell which tables need it: {churn}. "
            "Turn track_counts on (postgresql.conf, then reload the server)"
        )
        churn = "see above"
    if settings.table_autovacuum_off:
        warnings.append(
            f"autovacuum is turned off for {table} itself (autovacuum_enabled = false; "
            f"{churn}). Turn it back on with ALTER TABLE {table} RESET (autovacuum_enabled)"
        )
    warnings += tls.transport_warnings(
        f"the server at {settings.server_address}",
        encrypted=settings.encrypted,
        verified=not settings.unverified,
        remote=tls.is_remote(settings.server_address),
        fix="serve TLS and use sslmode=verify-full with sslrootcert in the URL",
    )
    return warnings


def _is_off(value: str) -> bool:
    """Whether PostgreSQL reads `value` as false (`off`, `false`, `no`, `0`, or a prefix)."""
    text = value.strip().lower()
    if not text:
        return False
    if text == "0" or (len(text) >= 2 and "off".startswith(text)):
        return True
    return "false".startswith(text) or "no".startswith(text)


__all__ = ["SETTINGS_SQL", "ServerSettings", "warnings_for"]
