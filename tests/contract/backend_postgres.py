# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

from ..postgres import PG_URL, drop_prefixed, require_postgres
from .backends import Backend


async def _cleanup(tmp: Path, namespace: str) -> None:
    await drop_prefixed(f"{namespace}_")


BACKEND = Backend(
    "postgres",
    lambda tmp, ns: f"{PG_URL}?prefix={ns}_",
    check=require_postgres,
    cleanup=_cleanup,
)
