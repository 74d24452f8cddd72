# SPDX-License-Identifier: MIT
"""What is PostgreSQL's own about TLS; the promises all drivers keep are in tests/contract.

libpq reads `sslmode` from the environment as well as the URL; `require`
and `verify-ca` (in libpq, encrypted but the server's name unchecked) are
taken as `verify-full` here, and `insecure_skip_verify` has to agree with the
URL's `sslmode`. With it, every
connection the pool holds is encrypted, not only the first (the server's
own `pg_stat_ssl` says so), and each logs its warning.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.database.postgres.connection import split_url
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import ConfigurationError, TLSVerificationError
from rainier_queue.queue import Queue

from ..contract.backends import BACKENDS, TLSServer
from ..postgres import require_postgres
from ..tls_certs import Certs


@pytest.fixture(scope="module")
def server(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSServer]:
    require_postgres()
    rules = BACKENDS["postgres"].tls
    assert rules is not None
    started = rules.server(certs, tmp_path_factory.mktemp("pg-tls"))
    try:
        yield started
    finally:
        started.stop()


def open_at(server: TLSServer, opened: list[Queue], host: str, query: str) -> Queue:
    queue = open_queue(server.url(host, f"tls{uuid.uuid4().hex[:8]}", query))
    opened.append(queue)
    return queue


@pytest.mark.parametrize("mode", ["require", "verify-ca"])
async def test_require_and_verify_ca_are_taken_as_verify_full(
    mode: str, certs: Certs, server: TLSServer, opened: list[Queue]
) -> None:
    queue = open_at(server, opened, "localhost", f"sslmode={mode}&sslrootcert={certs.ca}")
    await queue.push(job := QueuedJob.create("note", {"text": "hi"}))
    [got] = await queue.reserve("default")
    assert got.job.id == job.id

    unnamed = open_at(server, opened, "127.0.0.1", f"sslmode={mode}&sslrootcert={certs.ca}")
    with pytest.raises(TLSVerificationError, match="checked as verify-full"):
        await unnamed.size("default")


async def test_require_without_an_authority_checks_against_the_system_s_ones(
    server: TLSServer, opened: list[Queue]
) -> None:
    queue = open_at(server, opened, "localhost", "sslmode=require")  # ours is not the system's

    with pytest.raises(TLSVerificationError, match="sslrootcert"):
        await queue.size("default")


def test_the_environment_s_sslmode_counts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGSSLMODE", "require")

    dsn, _ = split_url("postgresql://postgres@db.example:5432/app", frozenset())

    assert "sslmode=verify-full" in dsn


def test_insecure_skip_verify_contradicting_sslmode_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="remove one of them"):
        open_queue("postgresql://h/app?sslmode=verify-full&insecure_skip_verify=true")
    with pytest.raises(ConfigurationError, match="no certificate to skip"):
        open_queue("postgresql://h/app?sslmode=disable&insecure_skip_verify=true")
    with pytest.raises(ConfigurationError, match="neither true nor false"):
        open_queue("postgresql://h/app?insecure_skip_verify=sometimes")


async def test_insecure_skip_verify_encrypts_every_connection_and_warns_for_each(
    server: TLSServer, opened: list[Queue], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    url = server.url("127.0.0.1", f"tls{uuid.uuid4().hex[:8]}", "insecure_skip_verify=true")
    with caplog.at_level(logging.WARNING, logger="rainier_queue.tls"):
        queue = open_queue(url)
        opened.append(queue)
        await queue.push(job := QueuedJob.create("note", {"text": "hi"}))
        [got] = await queue.reserve("default")
    assert got.job.id == job.id

    admin_url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres?sslmode=disable"
    with psycopg.connect(admin_url) as admin:
        rows = admin.execute(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            "WHERE a.application_name LIKE 'rainier-queue%'"
        ).fetchall()
    assert rows
    assert all(ssl for (ssl,) in rows), rows
    warned = [r for r in caplog.records if r.name == "rainier_queue.tls"]
    assert len(warned) >= len(rows), "a warning for each connection"
