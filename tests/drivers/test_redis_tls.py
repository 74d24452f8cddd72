# SPDX-License-Identifier: MIT
"""The Redis driver over TLS (`rediss://`): the certificate is checked, or the URL says it is not.

A private redis-server speaks only TLS, with a certificate signed by the
tests' own authority for `localhost` (tests/tls_certs.py). Given the
authority and dialled as `localhost`, the queue works. Without the
authority, or dialled as 127.0.0.1 (a name the certificate does not hold),
every call fails with `TLSVerificationError`, which says what to change,
instead of `BrokerUnavailable`, which a worker would wait out for ever. A URL
that turns the check off is refused unless it says `insecure_skip_verify=true`,
and then a warning is logged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from rainier_queue.cache import LockManager
from rainier_queue.cache.stores import open_cache
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.drivers.redis.connection import transport_warnings
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerRejected, ConfigurationError, TLSVerificationError
from rainier_queue.queue import Queue

from ..redis_servers import with_tls
from ..tls_certs import Certs


@pytest.fixture(scope="module")
def tls_port(certs: Certs) -> Iterator[int]:
    servers, port = with_tls(certs.cert, certs.key, certs.ca)
    try:
        yield port
    finally:
        servers.stop()


@pytest.fixture
def open_at(tls_port: int, opened: list[Queue]) -> Any:
    def opener(host: str, query: str = "") -> RedisQueue:
        prefix = f"tls{uuid.uuid4().hex[:8]}:"
        joiner = "&" if query else ""
        queue = open_queue(f"rediss://{host}:{tls_port}/0?prefix={prefix}{joiner}{query}")
        assert isinstance(queue, RedisQueue)
        opened.append(queue)
        return queue

    return opener


def a_job() -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex})


async def test_a_certificate_checked_against_the_given_authority_carries_the_queue(
    certs: Certs, open_at: Any
) -> None:
    queue = open_at("localhost", f"ssl_ca_certs={certs.ca}")
    await queue.push(job := a_job())

    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    await queue.acknowledge(got)
    assert await queue.size("default") == 0


async def test_a_certificate_from_an_unknown_authority_is_a_verification_error(
    open_at: Any,
) -> None:
    queue = open_at("localhost")  # the system's authorities never signed the tests' one

    with pytest.raises(TLSVerificationError) as caught:
        await queue.push(a_job())

    assert isinstance(caught.value, BrokerRejected)  # not an outage to wait out
    assert "ssl_ca_certs" in str(caught.value)
    assert "insecure_skip_verify=true" in str(caught.value)


async def test_a_host_the_certificate_does_not_name_is_a_verification_error(
    certs: Certs, open_at: Any
) -> None:
    queue = open_at("127.0.0.1", f"ssl_ca_certs={certs.ca}")  # the certificate names localhost

    with pytest.raises(TLSVerificationError, match="could not be verified") as caught:
        await queue.size("default")

    assert caught.value.host.startswith("127.0.0.1:")


@pytest.mark.parametrize("weakening", ["ssl_cert_reqs=none", "ssl_check_hostname=false"])
def test_turning_the_check_off_needs_insecure_skip_verify(weakening: str) -> None:
    with pytest.raises(ConfigurationError, match="insecure_skip_verify=true") as caught:
        open_queue(f"rediss://localhost:6380/0?{weakening}")
    assert weakening in str(caught.value)
    with pytest.raises(ConfigurationError, match="insecure_skip_verify=true"):
        open_cache(f"rediss://localhost:6380/0?{weakening}")


async def test_insecure_skip_verify_accepts_any_certificate_and_says_so(
    open_at: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rainier_queue.tls"):
        queue = open_at("127.0.0.1", "insecure_skip_verify=true&ssl_cert_reqs=none")
    await queue.push(job := a_job())

    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    warnings = [r.getMessage() for r in caplog.records if r.name == "rainier_queue.tls"]
    assert any("without verifying its certificate" in w for w in warnings), warnings
    assert all("@" not in w for w in warnings)  # the URL is redacted, never a password
    assert any("is not checked" in w for w in await queue.health_warnings())  # `doctor`


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://:pw@10.0.0.5:6379/0", "not encrypted"),
        ("redis://db.internal:6379/0?prefix=app:", "not encrypted"),
        ("redis-cluster://127.0.0.1:7000,10.0.0.2:7000", "not encrypted"),
        ("rediss://db.internal:6380/0?insecure_skip_verify=true", "is not checked"),
        ("redis://127.0.0.1:6379/0", None),
        ("redis://localhost/0", None),
        ("unix:///run/redis/redis.sock?db=2", None),
        ("rediss://db.internal:6380/0?ssl_ca_certs=/etc/ca.pem", None),
    ],
)
def test_doctor_warns_of_jobs_sent_in_the_clear_or_to_an_unchecked_server(
    url: str, says: str | None
) -> None:
    warnings = transport_warnings(url)

    if says is None:
        assert warnings == []
    else:
        (warning,) = warnings
        assert says in warning
        assert "pw" not in warning  # the password never shows


def test_insecure_skip_verify_without_tls_or_with_a_vague_value_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="does not use TLS"):
        open_queue("redis://127.0.0.1:6379/0?insecure_skip_verify=true")
    with pytest.raises(ConfigurationError, match="neither true nor false"):
        open_queue("rediss://localhost:6380/0?insecure_skip_verify=maybe")


async def test_the_lock_store_checks_the_certificate_too(certs: Certs, tls_port: int) -> None:
    verified = f"rediss://localhost:{tls_port}/0?ssl_ca_certs={certs.ca}&prefix=tlslocks:"
    async with open_cache(verified) as cache:
        held = await LockManager(cache).acquire(f"report-{uuid.uuid4().hex}", timedelta(seconds=30))
        assert held is not None
    async with open_cache(f"rediss://localhost:{tls_port}/0?prefix=tlslocks:") as cache:
        with pytest.raises(TLSVerificationError):
            await LockManager(cache).acquire(f"report-{uuid.uuid4().hex}", timedelta(seconds=30))
