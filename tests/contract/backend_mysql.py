# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

from ..mysql_service import SERVER, check, drop_tables
from .backends import Backend


async def _cleanup(tmp: Path, namespace: str) -> None:
    await drop_tables(f"{namespace}_")


BACKEND = Backend(
    "mysql",
    lambda tmp, ns: f"{SERVER}?prefix={ns}_",
    check=check,
    cleanup=_cleanup,
)
