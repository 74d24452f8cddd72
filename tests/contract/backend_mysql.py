# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

from ..mysql_service import SERVER, ThrowawayServer, check, drop_tables
from .backends import SECRET, Backend, Cut, Listen, closed_port

COMMIT = b"\x03COMMIT"
"""A COM_QUERY packet's command byte and the start of the query that commits a push."""


async def _cleanup(tmp: Path, namespace: str) -> None:
    await drop_tables(f"{namespace}_")


def _secret_url(tmp: Path, namespace: str) -> str:
    # root has no password here, so the server refuses this one: the error path is shown too.
    return f"mysql://root:{SECRET}@127.0.0.1:3306/test?prefix={namespace}_"


def _unreachable_url(tmp: Path, namespace: str) -> str:
    return f"mysql://root@127.0.0.1:{closed_port()}/test?prefix={namespace}_&connect_timeout=2s"


def _relayed_url(tmp: Path, namespace: str, port: int) -> str:
    return f"mysql://root@127.0.0.1:{port}/test?prefix={namespace}_&pool_max=1"


class _Private:
    outage = "is unavailable"

    def __init__(self, folder: Path, listen: Listen | None) -> None:
        self.server = ThrowawayServer(folder)
        self.host = "127.0.0.1"
        if listen is not None:
            self.server.listen_also(listen.host)
            self.host = listen.host
        self.server.start()

    def url(self, tmp: Path, namespace: str) -> str:
        return f"mysql://root@{self.host}:{self.server.port}/test?prefix={namespace}_"

    def crash(self) -> None:
        self.server.kill()

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server.start()

    def remove(self) -> None:
        self.server.stop()  # its data is under the test's temp dir


BACKEND = Backend(
    "mysql",
    lambda tmp, ns: f"{SERVER}?prefix={ns}_",
    check=check,
    cleanup=_cleanup,
    secret_url=_secret_url,
    unreachable_url=_unreachable_url,
    cut=Cut(3306, _relayed_url, pushes=[(3, COMMIT)]),
    private_server=_Private,
    wake_only={"poll_interval": "60s"},  # a push from another process must be heard
)
