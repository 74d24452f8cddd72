# SPDX-License-Identifier: MIT
"""An SQS endpoint for one run: moto in server mode behind a relay that counts the requests.

SQS bills per request, so the SQS row reports requests per job beside the
rates. Every system on SQS (ours, Celery over kombu) gets the same endpoint:
a `moto_server` process of the project's venv on a free loopback port, with
a relay in front of it in the adapter's process that counts each HTTP
request its clients make (every request line) and forwards the bytes. moto
closes each connection after its answer, so no client saves requests by
keeping connections either. Stdlib only: it loads in both venvs.

The server is the tests' moto (`tests/moto_atomic.py`), for every system
alike. Plain moto walks the whole queue several times a call, so with a
5,000-job backlog a receive took over a second and a run measured moto's
walks (0.4 jobs/s on a loaded machine, and jobs failed when their visibility
timeout passed while moto answered); and its receive can hand one message
to two receivers, which the run's check counts as a failure. The tests'
server answers the same things without either (tests/moto_fast.py).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from typing import Any

from ._common import ROOT

KEY = "testing"
REGION = "us-east-1"
ACCOUNT = "123456789012"
PYTHON = ROOT / ".venv" / "bin" / "python"
REQUEST_LINE = b" HTTP/1.1\r\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Endpoint:
    """moto on a port of its own, and the counting relay clients are given (`url`)."""

    def __init__(self) -> None:
        self.target = _free_port()
        self.moto = subprocess.Popen(
            [
                str(PYTHON),
                str(ROOT / "tests" / "moto_atomic.py"),
                "-H",
                "127.0.0.1",
                "-p",
                str(self.target),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.target), timeout=1).close()
                break
            except OSError:
                if self.moto.poll() is not None or time.monotonic() > give_up:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.05)
        self.requests = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def queue_url(self, name: str) -> str:
        return f"{self.url}/{ACCOUNT}/{name}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        tail = b""
        try:
            while data := source.recv(65536):
                if counted:
                    seen = tail + data
                    with self._lock:
                        self.requests += seen.count(REQUEST_LINE)
                    tail = data[-(len(REQUEST_LINE) - 1) :]
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def stop(self) -> None:
        self._listener.close()
        self.moto.terminate()
        try:
            self.moto.wait(10)
        except subprocess.TimeoutExpired:
            self.moto.kill()
            self.moto.wait()


def create_queue(endpoint: Endpoint, name: str, *, visibility: int = 90) -> str:
    """Make a standard queue through the relay (counted, but before the run's marks)."""
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
    body = json.dumps({"QueueName": name, "Attributes": {"VisibilityTimeout": str(visibility)}})
    connection.request(
        "POST",
        "/",
        body,
        {
            "X-Amz-Target": "AmazonSQS.CreateQueue",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential={KEY}/20260101/{REGION}/sqs/aws4_request, "
                "SignedHeaders=host, Signature=0"
            ),
        },
    )
    answer: Any = json.loads(connection.getresponse().read())
    connection.close()
    return str(answer["QueueUrl"])


__all__ = ["ACCOUNT", "KEY", "REGION", "Endpoint", "create_queue"]
