# SPDX-License-Identifier: MIT
"""NATS's TLS beyond the shared promises (tests/contract/test_tls.py): how a URL asks for it,
what `doctor` says without it, and a server that stops speaking it between two connections.

The last is NATS's own risk: its server speaks first, in the clear, and
nats-py upgrades to TLS only when the server asks. A client that was to use
TLS must not reconnect in the clear to whatever answers on the port now.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest

from rainier_queue.connections import open_queue
from rainier_queue.errors import BrokerError, ConfigurationError, TLSVerificationError
from rainier_queue.queue import Provisionable

from ..contract.backends import BACKENDS  # first: it imports every backend_*.py in turn

# isort: split
from ..contract.backend_nats import SERVER, check, cleanup, prepare
from ..contract.jobs import a_job
from ..nats_server import NATSServer, with_tls
from ..tls_certs import Certs

assert "nats" in BACKENDS


@pytest.fixture
async def namespace(tmp_path: Path) -> AsyncIterator[str]:
    """A namespace provisioned on the shared server (which speaks no TLS)."""
    check()
    name = "rqt" + uuid.uuid4().hex[:10]
    prepare(tmp_path, name, ["default"])
    yield name
    await cleanup(tmp_path, name)


@pytest.fixture
def tls_server(certs: Certs) -> Iterator[NATSServer]:
    server = with_tls(Path(tempfile.mkdtemp(prefix="rq-nats-tls-")), certs.cert, certs.key)
    yield server
    server.remove()


async def stored(server: str, stream: str) -> int:
    """How many messages `stream` holds, asked in the clear."""
    client = await nats.connect(server)
    try:
        return (await client.jetstream().stream_info(stream)).state.messages
    finally:
        await client.close()


async def first_said(caplog: pytest.LogCaptureFixture, *phrases: str) -> str:
    """The first of `phrases` the driver logs (within 30 s, ample for a reconnection)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while loop.time() < deadline:
        for record in caplog.records:
            for phrase in phrases:
                if phrase in record.getMessage():
                    return phrase
        await asyncio.sleep(0.05)
    raise AssertionError(f"the driver said none of {phrases} in 30 s")


def test_a_tls_url_is_refused_with_the_way_to_write_it_here() -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_queue("tls://nats.example.com:4222")

    assert "nats://host:4222/?tls=true" in str(caught.value)


async def test_an_authority_alone_asks_for_tls_and_is_refused_by_a_server_without_it(
    namespace: str, certs: Certs
) -> None:
    queue = open_queue(f"{SERVER}/?prefix={namespace}&tls_ca={certs.ca}")
    try:
        with pytest.raises(TLSVerificationError, match="does not speak TLS"):
            await queue.push(a_job())
    finally:
        await queue.aclose()

    assert await stored(SERVER, f"{namespace}-jobs") == 0, "nothing was sent in the clear"


def test_tls_turned_off_beside_an_authority_is_refused(certs: Certs) -> None:
    with pytest.raises(ConfigurationError, match="drop `tls=false`"):
        open_queue(f"{SERVER}/?tls=false&tls_ca={certs.ca}")


async def test_doctor_says_a_server_on_another_machine_is_reached_in_the_clear() -> None:
    remote = open_queue("nats://nats.example.com:4222/?prefix=app")
    local = open_queue("nats://127.0.0.1:4222/?prefix=app")
    try:
        [warning] = await remote.health_warnings()  # type: ignore[attr-defined]
        assert "not encrypted" in warning
        assert "tls=true" in warning
        assert await local.health_warnings() == []  # type: ignore[attr-defined]
    finally:
        await remote.aclose()
        await local.aclose()


async def test_a_server_that_comes_back_without_tls_is_not_reconnected_to_in_the_clear(
    tls_server: NATSServer, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"nats://localhost:{tls_server.port}/?prefix=rqtls&tls=true&tls_ca={certs.ca}"
    queue = open_queue(url)
    assert isinstance(queue, Provisionable)
    try:
        await queue.provision(["default"])
        await queue.push(a_job())
        caplog.set_level(logging.DEBUG, logger="rainier_queue.nats")

        tls_server.stop()
        tls_server.extra = ()  # the same port and store, in the clear
        tls_server.start()
        said = await first_said(caplog, "does not speak TLS", "reconnected to NATS")

        assert said == "does not speak TLS", "it reconnected in the clear"
        with pytest.raises(BrokerError):
            await queue.push(a_job())
    finally:
        await queue.aclose()

    assert await stored(f"nats://127.0.0.1:{tls_server.port}", "rqtls-jobs") == 1
