# SPDX-License-Identifier: MIT
"""Whether a local service answers, for test backends that need one."""

from __future__ import annotations

import socket

from .conftest import unreachable


def require_port(service: str, port: int, host: str = "127.0.0.1") -> None:
    """Skip (or, where services are required, fail) unless `host:port` accepts a connection."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return
    except OSError as exc:
        unreachable(service, f"{host}:{port}: {exc}")
