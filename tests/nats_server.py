# SPDX-License-Identifier: MIT
"""A private nats-server with JetStream on a free port, its file store in a folder of its own.

For the fault tests that crash and restart a server, and for the TLS
promises (`with_tls`): the shared one on 4222 is never touched.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

BINARY = shutil.which("nats-server") or "/usr/sbin/nats-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NATSServer:
    """One nats-server process, stopped and started again on the same port and store."""

    def __init__(
        self, folder: Path, *, host: str = "127.0.0.1", extra: tuple[str, ...] = ()
    ) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.folder / "nats.log").open("ab") as log:  # the server keeps its own copy
            self.process = self._spawn(log)
        self._wait()

    def _spawn(self, log: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                BINARY,
                "-a",
                self.host,
                "-p",
                str(self.port),
                "-js",
                "-sd",
                str(self.folder / "store"),
                *self.extra,
            ],
            stdout=log,
            stderr=log,
        )

    def _wait(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited: {(self.folder / 'nats.log').read_text()[-2000:]}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nats-server did not start listening in 20 s")

    def crash(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.crash()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def with_tls(folder: Path, cert: Path, key: Path) -> NATSServer:
    """A started nats-server that speaks TLS alone, showing `cert` (client certificates are
    not asked for: the TLS promises are about the client checking the server)."""
    server = NATSServer(folder, extra=("--tls", "--tlscert", str(cert), "--tlskey", str(key)))
    try:
        server.start()
    except BaseException:
        server.remove()
        raise
    return server
