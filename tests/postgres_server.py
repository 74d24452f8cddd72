# SPDX-License-Identifier: MIT
"""A PostgreSQL server of a test's own, which the test may stop, crash and start again.

Fault tests must never restart the shared server on 5432: other tests (and
other people's) are using it. This one is made by `initdb` in a temporary
folder and runs on a free port. PostgreSQL refuses to run as root, so when
the tests run as root (CI does) the server runs as the `postgres` OS user,
and its folder is handed to that user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from .conftest import unreachable

SERVICE = "a throw-away PostgreSQL"


def _bindir() -> Path:
    """The folder holding `initdb` and `postgres`: Debian keeps them off the PATH."""

    def version(folder: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", folder.parent.name))

    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
    on_path = shutil.which("initdb")
    if on_path is not None:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "postgres").exists():
            return folder
    unreachable(SERVICE, "no `initdb` and `postgres` found (is the PostgreSQL server installed?)")


def _run_as() -> pwd.struct_passwd | None:
    """The OS user to run the server as: None for ourselves, `postgres` if we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        unreachable(SERVICE, "running as root, and there is no `postgres` OS user to run it as")


class ThrowawayPostgres:
    """`initdb` in a temporary folder, then `postgres` on a free port, trust authentication."""

    def __init__(self) -> None:
        self.settings: list[str] = []
        """More `name=value` server settings for `start`."""
        self.bindir = _bindir()
        self.user = _run_as()
        self.folder = Path(tempfile.mkdtemp(prefix="rainier-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        if self.user is not None:
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        try:
            self._as_owner(
                [
                    str(self.bindir / "initdb"),
                    *("-D", str(self.data), "-U", "postgres", "-A", "trust"),
                    *("-E", "UTF8", "--locale=C", "--no-sync"),
                ],
                check=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            self.remove()
            output = getattr(exc, "stdout", b"") or b""
            unreachable(SERVICE, f"initdb failed: {exc} {output.decode(errors='replace')}")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start (or start again, on the same data) and wait until it takes connections."""
        with (self.folder / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    *("-D", str(self.data), "-p", str(self.port), "-k", str(self.folder)),
                    *("-c", "listen_addresses=127.0.0.1", "-c", "max_connections=60"),
                    *("-c", "fsync=on", "-c", "synchronous_commit=on"),
                    *("-c", "shared_buffers=32MB"),
                    *(arg for setting in self.settings for arg in ("-c", setting)),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self._uid,
                group=self._gid,
                extra_groups=self._groups,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{SERVICE} did not start: {exc}\n{self.log()}") from None
                time.sleep(0.1)

    def use_tls(self, cert: Path, key: Path) -> None:
        """Serve TLS too, with this certificate and key (copied in, owned by the server's user).

        Takes effect at the next `start`. Clients may still connect without TLS.
        """
        for source, name in ((cert, "server.crt"), (key, "server.key")):
            target = self.folder / name
            shutil.copyfile(source, target)
            target.chmod(0o600)  # the server refuses a key others can read
            if self.user is not None:
                os.chown(target, self.user.pw_uid, self.user.pw_gid)
        self.settings += [
            "ssl=on",
            f"ssl_cert_file={self.folder / 'server.crt'}",
            f"ssl_key_file={self.folder / 'server.key'}",
        ]

    def listen_also(self, address: str, clients: str) -> None:
        """Listen on `address` as well as loopback, and let the `clients` network in (trust).

        Takes effect at the next `start`.
        """
        self.settings.append(f"listen_addresses=127.0.0.1,{address}")
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {clients} trust\n")

    def stop(self, mode: str = "fast") -> None:
        """Shut down: `fast` (roll back and disconnect everyone, then a clean checkpoint) or
        `immediate` (like a crash: no checkpoint, so the next start replays the WAL)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal({"fast": signal.SIGINT, "immediate": signal.SIGQUIT}[mode])
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def remove(self) -> None:
        """Stop the server if it runs and delete its folder."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def _uid(self) -> int | None:
        return None if self.user is None else self.user.pw_uid

    @property
    def _gid(self) -> int | None:
        return None if self.user is None else self.user.pw_gid

    @property
    def _groups(self) -> list[int] | None:
        return None if self.user is None else []

    def _as_owner(self, command: list[str], *, check: bool) -> None:
        subprocess.run(
            command,
            check=check,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            user=self._uid,
            group=self._gid,
            extra_groups=self._groups,
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
