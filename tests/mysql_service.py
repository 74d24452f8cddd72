# SPDX-License-Identifier: MIT
"""The MariaDB/MySQL server the tests use, and how to drop what a test left there."""

from __future__ import annotations

import getpass
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

import aiomysql  # type: ignore[import-untyped]
import pymysql  # type: ignore[import-untyped]

from .conftest import unreachable
from .services import require_port

HOST = "127.0.0.1"
PORT = 3306
SERVER = f"mysql://root@{HOST}:{PORT}/test"

QUEUE_TABLES = ("jobs", "failed_jobs", "schema_version", "paused_queues", "records")


def check() -> None:
    """Skip (or fail, where services are required) unless MariaDB answers."""
    require_port("MariaDB", PORT, HOST)


async def drop_tables(prefix: str, names: tuple[str, ...] = (*QUEUE_TABLES, "cache")) -> None:
    """Drop the tables under `prefix` (a checked identifier, so safe to splice into SQL)."""
    conn = await aiomysql.connect(host=HOST, port=PORT, user="root", db="test", autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute("SET SESSION sql_notes = 0")  # "unknown table" is no news
            tables = ", ".join(f"`{prefix}{name}`" for name in names)
            await cur.execute(f"DROP TABLE IF EXISTS {tables}")
    finally:
        conn.close()


class ThrowawayServer:
    """A MariaDB of a test's own (data under its temp dir), which it may kill and restart.

    Fault tests never kill the shared server other tests use.
    """

    def __init__(self, folder: Path) -> None:
        for tool in ("mariadb-install-db", "mariadbd"):
            if shutil.which(tool) is None:
                unreachable("a throw-away MariaDB", f"`{tool}` is not installed")
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.options: list[str] = []
        """More `mariadbd` options for `start` (TLS, say)."""
        self._root_anywhere = False
        command = [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={self.data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            f"--user={getpass.getuser()}",
        ]
        # Seen once failing on a loaded machine with its output unread: tried twice, and a
        # second failure says what the tool printed.
        for attempt in (1, 2):
            done = subprocess.run(command, capture_output=True, check=False)
            if done.returncode == 0:
                break
            if attempt == 2:
                printed = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
                raise RuntimeError(f"mariadb-install-db exited {done.returncode}:\n{printed}")
            shutil.rmtree(self.data, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/test"

    def start(self) -> None:
        """Start (or restart, on the same data) and wait until it answers."""
        with (self.folder / "server.log").open("ab") as log:
            self.proc = self._spawn(log)
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root")
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the throw-away MariaDB did not start") from None
                time.sleep(0.1)
                continue
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE IF NOT EXISTS test")
                if self._root_anywhere:
                    cur.execute("CREATE USER IF NOT EXISTS 'root'@'%'")
                    cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'%'")
            conn.close()
            return

    def _spawn(self, log: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                "mariadbd",
                "--no-defaults",
                f"--datadir={self.data}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.folder / 'sock'}",
                f"--user={getpass.getuser()}",
                "--innodb-buffer-pool-size=32M",
                f"--pid-file={self.folder / 'pid'}",
                *self.options,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def listen_also(self, address: str) -> None:
        """Listen on `address` as well as loopback, from the next `start`; `start` then lets
        root in from anywhere (no password: a throw-away server on a test network)."""
        self.options.append(f"--bind-address=127.0.0.1,{address}")
        self._root_anywhere = True

    def use_tls(self, cert: Path, key: Path, ca: Path) -> None:
        """Offer TLS too, showing `cert` (signed by `ca`), from the next `start` on."""
        self.options += [f"--ssl-cert={cert}", f"--ssl-key={key}", f"--ssl-ca={ca}"]

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush beyond what each commit already did."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
