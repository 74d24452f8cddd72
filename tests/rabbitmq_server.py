# SPDX-License-Identifier: MIT
"""A private RabbitMQ node on free ports, its data, logs and Erlang cookie in a folder of its own.

For the fault tests that crash, stop and cut off a server: the shared one on
5672 is never touched, since other test processes use it at the same time.
A node takes a few seconds and about 150 MB to start, so only the tests
that need one start it.

Kept apart from the machine's node by its own node name (`rq<token>`),
AMQP and distribution ports, data folder (`RABBITMQ_MNESIA_BASE`), log
folder, config and env files (empty), no plugins, and `HOME` in the folder,
so Erlang writes a cookie of its own there rather than reading another. It
registers its name with the machine's `epmd`, as every node does.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""The script under /usr/sbin's wrapper, which would switch to the rabbitmq user."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def available() -> bool:
    return Path(SERVER).exists()


class RabbitMQServer:
    """One RabbitMQ node, stopped and started again on the same ports and data."""

    def __init__(
        self, folder: Path, *, host: str = "127.0.0.1", tls: tuple[Path, Path] | None = None
    ) -> None:
        """`host`: the address to listen on (`0.0.0.0` for the network cut tests); `tls`:
        a certificate and its key, to listen with TLS on `tls_port` as well."""
        self.folder = folder
        self.host = host
        self.port = free_port()
        self.tls_port = free_port()
        self.dist_port = free_port()
        self.node = f"rq{secrets.token_hex(4)}@localhost"
        self.process: subprocess.Popen[bytes] | None = None
        for sub in ("home", "data", "log"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / "env.conf").write_text("")
        (folder / "plugins").write_text("[].\n")
        config = [
            f"listeners.tcp.1 = {host}:{self.port}",
            "loopback_users = none",  # guest from the network namespace of the cut tests
        ]
        if tls is not None:
            config += [
                f"listeners.ssl.1 = {host}:{self.tls_port}",
                f"ssl_options.certfile = {tls[0]}",
                f"ssl_options.keyfile = {tls[1]}",
                "ssl_options.verify = verify_none",
                "ssl_options.fail_if_no_peer_cert = false",
            ]
        (folder / "rabbitmq.conf").write_text("\n".join(config) + "\n")

    def _environment(self) -> dict[str, str]:
        folder = self.folder
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")},
            "HOME": str(folder / "home"),
            "RUNNING_UNDER_SYSTEMD": "true",  # exec the VM: this process is the node
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_BASE": str(folder),
            "RABBITMQ_MNESIA_BASE": str(folder / "data"),
            "RABBITMQ_LOG_BASE": str(folder / "log"),
            "RABBITMQ_CONF_ENV_FILE": str(folder / "env.conf"),
            "RABBITMQ_CONFIG_FILE": str(folder / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(folder / "plugins"),
            "RABBITMQ_PID_FILE": str(folder / "node.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def start(self) -> None:
        with (self.folder / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                [SERVER],
                env=self._environment(),
                cwd=self.folder,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        self._wait()

    def _wait(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"rabbitmq-server exited: {(self.folder / 'server.log').read_text()[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.crash()
        raise RuntimeError("the private RabbitMQ node did not listen within 90 s")

    def crash(self) -> None:
        """SIGKILL the node: no shutdown; what its queues had fsynced is all that is kept."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM: the node stops as `rabbitmqctl stop` would."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.crash()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


__all__ = ["RabbitMQServer", "available", "free_port"]
