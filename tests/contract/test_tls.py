# SPDX-License-Identifier: MIT
"""The TLS promises, on every driver that speaks TLS (drivers/tls.py says why each is kept).

Each driver starts a server of the test's own through its `tls` hook
(backends.py), speaking TLS with a certificate for `localhost` alone, signed
by an authority the test makes (tests/tls_certs.py). Then, the same way on
each driver:

- given the authority and dialled as `localhost`, the queue works;
- without the authority, or dialled as 127.0.0.1 (a name the certificate
  does not hold), a call fails with `TLSVerificationError`, which says what to
  change, never `BrokerUnavailable`, which a worker would wait out for ever;
- TLS asked of a server that speaks none is refused, never dropped quietly;
- an option that turns a check off is refused unless the URL also says
  `insecure_skip_verify=true`, which works, logs a warning and shows in
  `doctor`; a checked connection gives `doctor` nothing to say;
- the lock store of the same URL, where the driver's server has one, keeps
  the same rules.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue.cache import LockManager
from rainier_queue.cache.stores import open_cache
from rainier_queue.connections import open_queue as open_url
from rainier_queue.drivers import DriverContext
from rainier_queue.errors import (
    BrokerRejected,
    ConfigurationError,
    QueueError,
    TLSVerificationError,
)
from rainier_queue.queue import Queue

from ..tls_certs import Certs, make_certs
from .backends import TLS, Backend, TLSServer
from .jobs import a_job


@pytest.fixture(scope="module")
def certs() -> Iterator[Certs]:
    """A throw-away authority and a certificate it signed for `localhost`."""
    with tempfile.TemporaryDirectory(prefix="rq-tls-certs-") as folder:
        yield make_certs(Path(folder))


@pytest.fixture(scope="module")
def started() -> Iterator[dict[str, TLSServer]]:
    """The TLS servers started in this module, one per driver, stopped at its end."""
    servers: dict[str, TLSServer] = {}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture
def rules(backend: Backend) -> TLS:
    assert backend.tls is not None
    return backend.tls


@pytest.fixture
def server(backend: Backend, rules: TLS, certs: Certs, started: dict[str, TLSServer]) -> TLSServer:
    if backend.name not in started:
        folder = Path(tempfile.mkdtemp(prefix=f"rq-tls-{backend.name}-"))
        started[backend.name] = rules.server(certs, folder)
    return started[backend.name]


Dial = Callable[[str, str], Queue]
"""Opens the TLS server's queue dialled as a host (`localhost`, `127.0.0.1`), with a query."""


@pytest.fixture
async def dial(
    server: TLSServer, namespace: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Dial]:
    """Open the TLS server's queue dialled as a host, with a query; all closed after."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no authority of the user's to fall back on
    opened: list[Queue] = []

    def opener(host: str, query: str) -> Queue:
        queue = open_url(server.url(host, namespace, query), {}, DriverContext())
        opened.append(queue)
        return queue

    yield opener
    for queue in opened:
        await queue.aclose()


def option(query: str) -> str:
    """The name of a query's last option: what an error should tell the user to set."""
    return query.rpartition("&")[2].partition("=")[0]


@pytest.mark.needs("tls")
async def test_a_certificate_checked_against_the_given_authority_carries_the_queue(
    rules: TLS, certs: Certs, dial: Dial
) -> None:
    queue = dial("localhost", rules.trusting(certs.ca))
    await queue.push(job := a_job())

    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    await queue.acknowledge(got)
    assert await queue.size("default") == 0


@pytest.mark.needs("tls")
async def test_a_certificate_from_an_unknown_authority_is_a_verification_error(
    rules: TLS, certs: Certs, dial: Dial
) -> None:
    queue = dial("localhost", rules.checked)  # the system's authorities never signed ours

    with pytest.raises(TLSVerificationError) as caught:
        await queue.push(a_job())

    assert isinstance(caught.value, BrokerRejected), "not an outage to wait out"
    said = str(caught.value)
    assert option(rules.trusting(certs.ca)) in said, f"it names the option to set: {said}"


@pytest.mark.needs("tls")
async def test_a_host_the_certificate_does_not_name_is_a_verification_error(
    rules: TLS, certs: Certs, server: TLSServer, dial: Dial
) -> None:
    queue = dial("127.0.0.1", rules.trusting(certs.ca))  # the certificate names localhost

    with pytest.raises(TLSVerificationError) as caught:
        await queue.size("default")

    assert caught.value.host == f"127.0.0.1:{server.port}"


@pytest.mark.needs("tls")
async def test_tls_asked_of_a_server_that_speaks_none_is_refused_not_used_in_the_clear(
    backend: Backend, rules: TLS, namespace: str, tmp_path: Path
) -> None:
    assert rules.plain_url is not None
    if backend.check is not None:
        backend.check()
    queue = open_url(rules.plain_url(namespace), {}, DriverContext())
    try:
        with pytest.raises(QueueError) as caught:
            await queue.push(a_job())
    finally:
        await queue.aclose()
    plain = backend.open(tmp_path, namespace)
    try:
        assert await plain.size("default") == 0, "nothing was sent in the clear"
    finally:
        await plain.aclose()
        if backend.cleanup is not None:
            await backend.cleanup(tmp_path, namespace)
    assert isinstance(caught.value, TLSVerificationError), (
        f"a server without TLS is a setting to fix, not an outage to wait out: {caught.value!r}"
    )
    assert "TLS" in str(caught.value)


@pytest.mark.needs("tls")
async def test_turning_a_check_off_needs_insecure_skip_verify(
    rules: TLS, server: TLSServer, namespace: str
) -> None:
    for weakening in rules.weakenings:
        url = server.url("localhost", namespace, weakening)
        with pytest.raises(ConfigurationError, match="insecure_skip_verify=true") as caught:
            open_url(url, {}, DriverContext())
        assert weakening in str(caught.value)
        with pytest.raises(ConfigurationError, match="insecure_skip_verify=true"):
            open_cache(url)


@pytest.mark.needs("tls")
async def test_insecure_skip_verify_accepts_any_certificate_and_says_so(
    rules: TLS, dial: Dial, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rainier_queue.tls"):
        queue = dial("127.0.0.1", rules.insecure)  # no authority, and a name it lacks
        await queue.push(job := a_job())
        [got] = await queue.reserve("default")

    assert got.job.id == job.id
    warnings = [r.getMessage() for r in caplog.records if r.name == "rainier_queue.tls"]
    assert warnings
    assert all("without verifying its certificate" in w for w in warnings), warnings
    doctor = await queue.health_warnings()  # type: ignore[attr-defined]
    assert any("insecure_skip_verify=true" in w for w in doctor), doctor


@pytest.mark.needs("tls")
async def test_doctor_has_nothing_to_say_of_a_checked_tls_connection(
    rules: TLS, certs: Certs, dial: Dial
) -> None:
    queue = dial("localhost", rules.trusting(certs.ca))
    await queue.size("default")

    doctor = await queue.health_warnings()  # type: ignore[attr-defined]

    assert not [w for w in doctor if "TLS" in w or "encrypted" in w or "certificate" in w]


@pytest.mark.needs("tls", "lock_store")
async def test_the_lock_store_checks_the_certificate_too(
    rules: TLS, certs: Certs, server: TLSServer, namespace: str, tmp_path: Path
) -> None:
    async with open_cache(server.url("localhost", namespace, rules.trusting(certs.ca))) as cache:
        held = await LockManager(cache).acquire(f"report-{uuid.uuid4().hex}", timedelta(seconds=30))
        assert held is not None
    async with open_cache(server.url("localhost", namespace, rules.checked)) as cache:
        with pytest.raises(TLSVerificationError):
            await LockManager(cache).acquire(f"report-{uuid.uuid4().hex}", timedelta(seconds=30))
