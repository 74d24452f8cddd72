# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

import pymysql  # type: ignore[import-untyped]

from ..app_transactions import mysql_transaction
from ..foreign.catalog import NUL_BAD_ROWS
from ..foreign.planting import sql_rows
from ..mysql_service import SERVER, ThrowawayServer, check, drop_tables
from ..tls_certs import Certs
from .backends import SECRET, TLS, Backend, Cut, Listen, closed_port
from .raw_storage import mysql_raw

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


def _insert(tmp: Path, namespace: str, rows: list[dict[str, object]]) -> None:
    """Rows into the namespace's jobs table with PyMySQL, as another program would."""
    conn = pymysql.connect(
        host="127.0.0.1", port=3306, user="root", database="test", autocommit=True
    )
    try:
        with conn.cursor() as cur:
            for row in rows:
                marks = ", ".join(["%s"] * len(row))
                cur.execute(
                    f"INSERT INTO `{namespace}_jobs` ({', '.join(row)}) VALUES ({marks})",
                    list(row.values()),
                )
    finally:
        conn.close()


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


class _TLSServer:
    """A throw-away MariaDB that offers TLS (aiomysql would log in without it if it did not)."""

    def __init__(self, certs: Certs, folder: Path) -> None:
        self.server = ThrowawayServer(folder)
        self.server.use_tls(certs.cert, certs.key, certs.ca)
        self.server.start()
        self.port = self.server.port

    def url(self, host: str, namespace: str, query: str) -> str:
        return f"mysql://root@{host}:{self.port}/test?prefix={namespace}_&{query}"

    def stop(self) -> None:
        self.server.stop()  # its data is under the folder it was given


TLS_RULES = TLS(
    server=_TLSServer,
    trusting=lambda ca: f"ssl_ca={ca}",
    checked="ssl=true",
    insecure="insecure_skip_verify=true",
    plain_url=lambda ns: f"{SERVER}?prefix={ns}_&ssl=true",  # the shared server has TLS off
)

BACKEND = Backend(
    "mysql",
    lambda tmp, ns: f"{SERVER}?prefix={ns}_",
    transaction=lambda tmp: mysql_transaction(),
    check=check,
    cleanup=_cleanup,
    secret_url=_secret_url,
    unreachable_url=_unreachable_url,
    cut=Cut(3306, _relayed_url, pushes=[(3, COMMIT)]),
    private_server=_Private,
    wake_only={"poll_interval": "60s"},  # a push from another process must be heard
    tls=TLS_RULES,
    raw=mysql_raw,
    plant=sql_rows(_insert, bad=NUL_BAD_ROWS),
)
