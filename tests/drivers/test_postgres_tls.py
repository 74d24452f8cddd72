# SPDX-License-Identifier: MIT
"""The PostgreSQL driver over TLS: `verify-full` works, weaker modes must be asked for knowingly.

A throw-away server (tests/postgres_server.py) serves TLS with a certificate
signed by the tests' own authority for `localhost` (tests/tls_certs.py).
`sslmode=verify-full` with that authority, dialled as `localhost`, carries
the queue. Dialled as 127.0.0.1, or without the authority, the certificate
fails its check, and that is a `TLSVerificationError` saying what to change,
not a `BrokerUnavailable` a worker would wait out for ever. `sslmode=require`
and `verify-ca` (in libpq, encrypted but the server's name unchecked) are
taken as `verify-full`; only `insecure_skip_verify=true` leaves the server
unchecked, and it logs a warning per connection.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.database.postgres.connection import split_url
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerRejected, ConfigurationError, TLSVerificationError
from rainier_queue.queue import Queue

from ..postgres_server import ThrowawayPostgres
from ..tls_certs import Certs


@pytest.fixture(scope="module")
def server(certs: Certs) -> Iterator[ThrowawayPostgres]:
    pg = ThrowawayPostgres()
    try:
        pg.use_tls(certs.cert, certs.key)
        pg.start()
        yield pg
    finally:
        pg.remove()


@pytest.fixture
def open_at(server: ThrowawayPostgres, opened: list[Queue]) -> Any:
    def opener(host: str, query: str) -> Queue:
        prefix = f"tls{uuid.uuid4().hex[:8]}_"
        url = f"postgresql://postgres@{host}:{server.port}/postgres?prefix={prefix}&{query}"
        queue = open_queue(url)
        opened.append(queue)
        return queue

    return opener


def a_job() -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex})


async def test_verify_full_with_the_authority_carries_the_queue(certs: Certs, open_at: Any) -> None:
    queue = open_at("localhost", f"sslmode=verify-full&sslrootcert={certs.ca}")
    await queue.push(job := a_job())

    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    await queue.acknowledge(got)
    assert await queue.size("default") == 0


async def test_a_host_the_certificate_does_not_name_is_a_verification_error(
    certs: Certs, server: ThrowawayPostgres, open_at: Any
) -> None:
    queue = open_at("127.0.0.1", f"sslmode=verify-full&sslrootcert={certs.ca}")

    with pytest.raises(TLSVerificationError) as caught:
        await queue.push(a_job())

    assert isinstance(caught.value, BrokerRejected)  # not an outage to wait out
    assert caught.value.host == f"127.0.0.1:{server.port}"
    assert "sslrootcert" in str(caught.value)


async def test_verify_full_without_an_authority_is_a_verification_error(
    open_at: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt to fall back on
    queue = open_at("localhost", "sslmode=verify-full")

    with pytest.raises(TLSVerificationError, match="insecure_skip_verify=true"):
        await queue.size("default")


@pytest.mark.parametrize("mode", ["require", "verify-ca"])
async def test_require_and_verify_ca_are_taken_as_verify_full(
    mode: str, certs: Certs, open_at: Any
) -> None:
    queue = open_at("localhost", f"sslmode={mode}&sslrootcert={certs.ca}")
    await queue.push(job := a_job())
    [got] = await queue.reserve("default")
    assert got.job.id == job.id

    unchecked_name = open_at("127.0.0.1", f"sslmode={mode}&sslrootcert={certs.ca}")
    with pytest.raises(TLSVerificationError, match="checked as verify-full"):
        await unchecked_name.size("default")


async def test_require_without_an_authority_checks_against_the_systems_ones(
    open_at: Any,
) -> None:
    queue = open_at("localhost", "sslmode=require")  # the tests' authority is not the system's

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


async def test_insecure_skip_verify_encrypts_unchecked_and_warns_for_each_connection(
    server: ThrowawayPostgres, open_at: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rainier_queue.tls"):
        queue = open_at("127.0.0.1", "insecure_skip_verify=true")  # no CA, a name it lacks
        await queue.push(job := a_job())
        [got] = await queue.reserve("default")
    assert got.job.id == job.id

    # Every connection the queue holds is encrypted: insecure_skip_verify asks for TLS.
    with psycopg.connect(server.url) as admin:
        rows = admin.execute(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            "WHERE a.application_name LIKE 'rainier-queue%'"
        ).fetchall()
    assert rows
    assert all(ssl for (ssl,) in rows), rows
    warnings = [r.getMessage() for r in caplog.records if r.name == "rainier_queue.tls"]
    assert warnings
    assert all("without verifying its certificate" in w for w in warnings)
    # And `doctor` says so too.
    assert any("insecure_skip_verify=true" in w for w in await queue.health_warnings())
