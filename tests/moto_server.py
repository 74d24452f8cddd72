# SPDX-License-Identifier: MIT
"""SQS for the tests: moto in server mode on a free loopback port, and an outage relay.

`shared()` is one moto server per test process, started when a test first
asks for it and stopped when the process ends. It runs as a process of its
own (`moto_server`), not moto's `ThreadedMotoServer`: in a thread it shared
the tests' interpreter lock (a few thousand calls took minutes on two
cores) and its thread per request counted among the test's threads; every namespace
on it is a queue prefix of its own. `Outage` is a server of a test's own
for the fault tests: a private moto server behind a relay the test can
stop (every connection through it cut, nothing listening) and start again
on the same port. moto keeps its queues in memory, so a moto process that
really died would lose them; what a worker meets on AWS is an endpoint
that stops answering and comes back with its messages, which is what the
relay's outage is.
"""

from __future__ import annotations

import atexit
import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REGION = "us-east-1"
KEY = "testing"

_shared: list[MotoServer] = []
_lock = threading.Lock()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PORT = free_port()
"""The port this process's shared server will take: known before it starts, so a backend
can name it at import (the `cut` hook) without starting moto in every test process."""


class MotoServer:
    """One `moto_server` process on 127.0.0.1:`port`, its output dropped (a line a request);
    given a certificate and its key, it speaks HTTPS alone (moto's own `--ssl-cert`).

    Its SQS calls on messages are atomic (tests/moto_atomic.py), as SQS's are: moto's own
    can hand one message to two receivers at once. `atomic=False` serves moto unchanged."""

    def __init__(
        self,
        port: int,
        *,
        cert: Path | None = None,
        key: Path | None = None,
        atomic: bool = True,
    ) -> None:
        self.port = port
        https = ["-c", str(cert), "-k", str(key)] if cert is not None and key is not None else []
        serve = (
            [str(Path(__file__).with_name("moto_atomic.py"))]
            if atomic
            else ["-c", "from moto.server import main; main()"]
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                *serve,
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
                *https,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > give_up:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start on port {port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(port: int = 0, *, atomic: bool = True) -> tuple[MotoServer, int]:
    """A moto server of its own on a loopback port (a free one by default), and the port."""
    server = MotoServer(port or free_port(), atomic=atomic)
    return server, server.port


def shared() -> int:
    """The port of this test process's moto server, started on first use."""
    with _lock:
        if not _shared:
            server, _ = start_server(PORT)
            _shared.append(server)
            atexit.register(server.stop)
        return PORT


class Relay:
    """Relays `listen`:`port` to 127.0.0.1:`target` in threads, until stopped; startable again."""

    def __init__(self, target: int, *, host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        with socket.socket() as probe:
            probe.bind((host, 0))
            self.port = int(probe.getsockname()[1])
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._guard = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._guard:
                if self._listener is not listener:  # stopped meanwhile
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            for one, other in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(one, other), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        with self._guard:
            for sock in sockets:
                self._open.discard(sock)
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def stop(self) -> None:
        """Stop listening and cut every connection through the relay."""
        with self._guard:
            listener, self._listener = self._listener, None
            open_now, self._open = list(self._open), set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class Outage:
    """A private moto server behind a `Relay`: `crash`/`stop` cut it off, `start` brings it back."""

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self.server, self.target = start_server()
        self.relay = Relay(self.target, host=host)
        self.port = self.relay.port
        self.relay.start()

    def crash(self) -> None:
        self.relay.stop()

    def stop(self) -> None:
        self.relay.stop()

    def start(self) -> None:
        self.relay.start()

    def remove(self) -> None:
        self.relay.stop()
        self.server.stop()


async def delete_queues(port: int, prefix: str) -> None:
    """Delete every queue on the moto server at `port` whose name starts with `prefix`."""
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "sqs",
        region_name=REGION,
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id=KEY,
        aws_secret_access_key=KEY,
    ) as client:
        answer = await client.list_queues(QueueNamePrefix=prefix, MaxResults=1000)
        for url in answer.get("QueueUrls", []):
            await client.delete_queue(QueueUrl=url)


__all__ = [
    "KEY",
    "MotoServer",
    "PORT",
    "REGION",
    "Outage",
    "Relay",
    "delete_queues",
    "free_port",
    "shared",
    "start_server",
]
