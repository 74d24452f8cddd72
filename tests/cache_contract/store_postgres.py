# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

from ..postgres import PG_URL, drop_prefixed, require_postgres
from .stores import Store


async def _cleanup(tmp: Path, namespace: str) -> None:
    await drop_prefixed(f"{namespace}_")


STORE = Store(
    "postgres",
    lambda tmp, ns: f"{PG_URL}?prefix={ns}_",
    check=require_postgres,
    cleanup=_cleanup,
)
