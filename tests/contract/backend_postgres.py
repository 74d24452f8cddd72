# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

import psycopg

from ..app_transactions import postgres_transaction
from ..foreign.planting import sql_rows
from ..postgres import PG_URL, drop_prefixed, require_postgres
from ..postgres_server import ThrowawayPostgres
from ..tls_certs import Certs
from .backends import SECRET, TLS, Backend, Cut, Listen, closed_port
from .raw_storage import postgres_raw

SYNC = b"S\x00\x00\x00\x04"
"""The Sync message that ends an extended-protocol INSERT, whose answer carries the commit."""
COPY_DONE = b"c\x00\x00\x00\x04"
"""The CopyDone message that ends a COPY."""
A_COPY = 100
"""Jobs in a push big enough to go by COPY (the driver copies from 32 up)."""


async def _cleanup(tmp: Path, namespace: str) -> None:
    await drop_prefixed(f"{namespace}_")


def _secret_url(tmp: Path, namespace: str) -> str:
    # The shared server trusts loopback, so the password is sent and never checked.
    return f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test?prefix={namespace}_"


def _unreachable_url(tmp: Path, namespace: str) -> str:
    return (
        f"postgresql://postgres@127.0.0.1:{closed_port()}/test?prefix={namespace}_&pool_timeout=2s"
    )


def _relayed_url(tmp: Path, namespace: str, port: int) -> str:
    return (
        f"postgresql://postgres@127.0.0.1:{port}/test?prefix={namespace}_"
        "&sslmode=disable&pool_min=1&pool_max=1"
    )


def _insert(tmp: Path, namespace: str, rows: list[dict[str, object]]) -> None:
    """Rows into the namespace's jobs table with psycopg, as another program would."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for row in rows:
            marks = ", ".join(["%s"] * len(row))
            conn.execute(
                f"INSERT INTO {namespace}_jobs ({', '.join(row)}) VALUES ({marks})",
                list(row.values()),
            )


class _Private:
    outage = "is unavailable"

    def __init__(self, listen: Listen | None) -> None:
        self.server = ThrowawayPostgres()
        self.host = "127.0.0.1"
        try:
            if listen is not None:
                self.server.listen_also(listen.host, listen.network)
                self.host = listen.host
            self.server.start()
        except BaseException:
            self.server.remove()
            raise

    def url(self, tmp: Path, namespace: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.server.port}/postgres?prefix={namespace}_"

    def crash(self) -> None:
        self.server.stop("immediate")  # no checkpoint: the next start replays the WAL

    def stop(self) -> None:
        self.server.stop("fast")

    def start(self) -> None:
        self.server.start()

    def remove(self) -> None:
        self.server.remove()


class _TLSServer:
    """A throw-away PostgreSQL that offers TLS (and still takes connections without)."""

    def __init__(self, certs: Certs, folder: Path) -> None:
        self.server = ThrowawayPostgres()
        try:
            self.server.use_tls(certs.cert, certs.key)
            self.server.start()
        except BaseException:
            self.server.remove()
            raise
        self.port = self.server.port

    def url(self, host: str, namespace: str, query: str) -> str:
        return f"postgresql://postgres@{host}:{self.port}/postgres?prefix={namespace}_&{query}"

    def stop(self) -> None:
        self.server.remove()


TLS_RULES = TLS(
    server=_TLSServer,
    trusting=lambda ca: f"sslmode=verify-full&sslrootcert={ca}",
    checked="sslmode=verify-full",  # with HOME elsewhere: no ~/.postgresql/root.crt
    insecure="insecure_skip_verify=true",
    weakenings=(),  # require and verify-ca are taken as verify-full (test_postgres_tls.py)
    plain_url=lambda ns: f"{PG_URL}?prefix={ns}_&sslmode=verify-full",
)

BACKEND = Backend(
    "postgres",
    lambda tmp, ns: f"{PG_URL}?prefix={ns}_",
    transaction=lambda tmp: postgres_transaction(),
    check=require_postgres,
    cleanup=_cleanup,
    secret_url=_secret_url,
    unreachable_url=_unreachable_url,
    cut=Cut(5432, _relayed_url, pushes=[(1, SYNC), (A_COPY, COPY_DONE)]),
    private_server=lambda folder, listen: _Private(listen),
    tls=TLS_RULES,
    raw=postgres_raw,
    plant=sql_rows(_insert),  # text with a NUL in it PostgreSQL refuses on insert
)
