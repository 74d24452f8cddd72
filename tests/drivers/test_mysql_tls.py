# SPDX-License-Identifier: MIT
"""What is MySQL's own about TLS; the promises every driver keeps are tests/contract/test_tls.py.

aiomysql would carry on in the clear where TLS was asked for, so the queue's
connections are checked to have spoken TLS (the server's `Ssl_accepts`
counts them); `doctor` reads how jobs travel from the URL; settings that
cannot work are refused at startup, the lock store's too; and a query whose
error text reads like a certificate failure is not taken for one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

from rainier_queue.cache.stores import open_cache
from rainier_queue.drivers import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import ConfigurationError, TLSVerificationError
from rainier_queue.queue import Queue

from ..contract.backends import BACKENDS, TLSServer
from ..mysql_service import check
from ..tls_certs import Certs


@pytest.fixture(scope="module")
def server(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSServer]:
    check()
    rules = BACKENDS["mysql"].tls
    assert rules is not None
    started = rules.server(certs, tmp_path_factory.mktemp("mysql-tls"))
    try:
        yield started
    finally:
        started.stop()


def tls_handshakes(server: TLSServer) -> int:
    conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'")
            (_, value) = cur.fetchone()
            return int(value)
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("host", "warned"), [("10.0.0.5", True), ("db.internal", True), ("127.0.0.1", False)]
)
def test_doctor_warns_of_jobs_sent_in_the_clear_to_another_machine(host: str, warned: bool) -> None:
    queue = open_queue(f"mysql://root:pw@{host}:3306/app")
    warnings = queue._pool.transport_warnings()  # type: ignore[attr-defined]

    assert bool(warnings) is warned
    assert all("not encrypted" in w and "ssl_ca" in w and "pw" not in w for w in warnings)


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
    with pytest.raises(ConfigurationError, match=says):
        open_cache(f"mysql://root@db.example:3306/app?{query}")


async def test_the_queue_s_connections_speak_tls_when_asked_to(
    certs: Certs, server: TLSServer, opened: list[Queue]
) -> None:
    before = tls_handshakes(server)
    queue = open_queue(server.url("localhost", f"tls{uuid.uuid4().hex[:8]}", f"ssl_ca={certs.ca}"))
    opened.append(queue)
    await queue.push(QueuedJob.create("note", {"text": "hi"}))

    [got] = await queue.reserve("default")
    await queue.acknowledge(got)

    assert tls_handshakes(server) > before, "the queue's connections did speak TLS"


def test_a_query_error_that_reads_like_a_certificate_failure_is_not_one() -> None:
    from rainier_queue.drivers.database.mysql.address import ServerAddress
    from rainier_queue.drivers.database.mysql.connection import translate

    address, _ = ServerAddress.from_url("mysql://root@db.example:3306/app", what="test")

    mismatch = pymysql.err.OperationalError(1136, "Column count doesn't match value count")
    quoted = pymysql.err.ProgrammingError(1064, "near 'certificate verify failed' at line 1")

    for error in (mismatch, quoted):
        translated = translate(error, address)
        assert not isinstance(translated, TLSVerificationError), error
