# SPDX-License-Identifier: MIT
"""The MySQL driver over TLS: asked for in the URL, checked when used, never silently dropped.

A throw-away MariaDB (tests/mysql_service.py) offers TLS with a certificate
signed by the tests' own authority for `localhost` (tests/tls_certs.py).
With `ssl_ca` and dialled as `localhost`, the queue works over TLS. Without
the authority, or dialled as 127.0.0.1, the certificate fails its check:
`TLSVerificationError`, not an outage. aiomysql would log in without TLS to
a server that does not offer it; the driver refuses that connection, shown
against the shared server, which has TLS off.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pymysql  # type: ignore[import-untyped]
import pytest

from rainier_queue.cache.stores import open_cache
from rainier_queue.drivers import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerRejected, ConfigurationError, TLSVerificationError
from rainier_queue.queue import Queue

from ..mysql_service import SERVER, ThrowawayServer, check
from ..tls_certs import Certs


@pytest.fixture(scope="module")
def server(certs: Certs) -> Iterator[ThrowawayServer]:
    with tempfile.TemporaryDirectory(prefix="rq-mysql-tls-") as folder:
        db = ThrowawayServer(Path(folder))
        db.use_tls(certs.cert, certs.key, certs.ca)
        try:
            db.start()
            yield db
        finally:
            db.stop()


@pytest.fixture
def open_at(server: ThrowawayServer, opened: list[Queue]) -> Any:
    def opener(host: str, query: str) -> Queue:
        prefix = f"tls{uuid.uuid4().hex[:8]}_"
        queue = open_queue(f"mysql://root@{host}:{server.port}/test?prefix={prefix}&{query}")
        opened.append(queue)
        return queue

    return opener


def a_job() -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex})


def tls_handshakes(server: ThrowawayServer) -> int:
    conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'")
            (_, value) = cur.fetchone()
            return int(value)
    finally:
        conn.close()


async def test_a_certificate_checked_against_the_given_authority_carries_the_queue(
    certs: Certs, server: ThrowawayServer, open_at: Any
) -> None:
    before = tls_handshakes(server)
    queue = open_at("localhost", f"ssl_ca={certs.ca}")
    await queue.push(job := a_job())

    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    await queue.acknowledge(got)
    assert tls_handshakes(server) > before  # the queue's connections did speak TLS


async def test_a_certificate_from_an_unknown_authority_is_a_verification_error(
    open_at: Any,
) -> None:
    queue = open_at("localhost", "ssl=true")  # the system's authorities never signed ours

    with pytest.raises(TLSVerificationError) as caught:
        await queue.push(a_job())

    assert isinstance(caught.value, BrokerRejected)  # not an outage to wait out
    assert "ssl_ca" in str(caught.value)


async def test_a_host_the_certificate_does_not_name_is_a_verification_error(
    certs: Certs, server: ThrowawayServer, open_at: Any
) -> None:
    queue = open_at("127.0.0.1", f"ssl_ca={certs.ca}")  # the certificate names localhost

    with pytest.raises(TLSVerificationError) as caught:
        await queue.size("default")

    assert caught.value.host == f"127.0.0.1:{server.port}"


async def test_insecure_skip_verify_accepts_any_certificate_and_says_so(
    open_at: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rainier_queue.tls"):
        queue = open_at("127.0.0.1", "insecure_skip_verify=true")
        await queue.push(job := a_job())
        [got] = await queue.reserve("default")

    assert got.job.id == job.id
    warnings = [r.getMessage() for r in caplog.records if r.name == "rainier_queue.tls"]
    assert any("without verifying its certificate" in w for w in warnings), warnings
    assert any("is not checked" in w for w in await queue.health_warnings())  # `doctor`


async def test_doctor_has_nothing_to_say_of_a_checked_tls_connection(
    certs: Certs, open_at: Any
) -> None:
    queue = open_at("localhost", f"ssl_ca={certs.ca}")

    assert not [w for w in await queue.health_warnings() if "TLS" in w or "encrypted" in w]


@pytest.mark.parametrize(
    ("host", "warned"), [("10.0.0.5", True), ("db.internal", True), ("127.0.0.1", False)]
)
def test_doctor_warns_of_jobs_sent_in_the_clear_to_another_machine(host: str, warned: bool) -> None:
    queue = open_queue(f"mysql://root:pw@{host}:3306/app")
    warnings = queue._pool.transport_warnings()  # type: ignore[attr-defined]

    assert bool(warnings) is warned
    assert all("not encrypted" in w and "ssl_ca" in w and "pw" not in w for w in warnings)


async def test_a_server_that_offers_no_tls_is_refused_not_used_in_the_clear(
    opened: list[Queue],
) -> None:
    check()
    queue = open_queue(f"{SERVER}?prefix=tlsoff_&ssl=true")  # the shared server has TLS off
    opened.append(queue)

    with pytest.raises(TLSVerificationError, match="did not offer TLS"):
        await queue.size("default")


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("ssl_ca=/tmp/ca.pem&insecure_skip_verify=true", "remove one of them"),
        ("ssl=false&insecure_skip_verify=true", "remove one of them"),
        ("ssl_cert=/tmp/client.crt", "needs both ssl_cert and ssl_key"),
        ("ssl_ca=/nonexistent/ca.pem", "cannot load the TLS files"),
        ("ssl=maybe", "must be true or false"),
        ("insecure_skip_verify=perhaps", "neither true nor false"),
    ],
)
def test_tls_settings_that_cannot_work_are_refused_at_startup(query: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        open_queue(f"mysql://root@db.example:3306/app?{query}")


async def test_the_lock_store_takes_the_same_tls_settings(
    certs: Certs, server: ThrowawayServer
) -> None:
    url = f"mysql://root@localhost:{server.port}/test?prefix=tlscache_&ssl_ca={certs.ca}"
    async with open_cache(url) as cache:
        await cache.put("greeting", b"hello", timedelta(seconds=60))
        assert await cache.get("greeting") == b"hello"
    with pytest.raises(ConfigurationError, match="remove one of them"):
        open_cache(f"{url}&insecure_skip_verify=true")


def test_a_query_error_that_reads_like_a_certificate_failure_is_not_one() -> None:
    from rainier_queue.drivers.database.mysql.connection import ServerAddress, translate

    address, _ = ServerAddress.from_url("mysql://root@db.example:3306/app", what="test")

    mismatch = pymysql.err.OperationalError(1136, "Column count doesn't match value count")
    quoted = pymysql.err.ProgrammingError(1064, "near 'certificate verify failed' at line 1")

    for error in (mismatch, quoted):
        translated = translate(error, address)
        assert not isinstance(translated, TLSVerificationError), error
