# SPDX-License-Identifier: MIT
"""The house rules that keep the layers apart, checked by reading the imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rainier_queue

PACKAGE = Path(rainier_queue.__file__).parent
CORE = [
    "job.py",
    "queue.py",
    "envelope.py",
    "payload.py",
    "registry.py",
    "events.py",
    "dispatch.py",
    "backoff.py",
    "context.py",
    "worker",
    "scheduling",
]
FORBIDDEN = (
    "rainier_queue.drivers",
    "rainier_queue.cli",
    "drivers",
    "cli",
    "sqlite3",
    "redis",
    "psycopg",
    "aiomysql",
    "aiokafka",
    "aio_pika",
    "nats",
    "aiobotocore",
)


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base.lstrip(".") if node.level <= 1 else base)
    return names


def core_files() -> list[Path]:
    files: list[Path] = []
    for entry in CORE:
        target = PACKAGE / entry
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return files


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_never_imports_a_driver_the_cli_or_a_broker_client(path: Path) -> None:
    bad = {
        name
        for name in imports_of(path)
        if any(name == f or name.startswith(f + ".") or name.lstrip(".") == f for f in FORBIDDEN)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_nothing_in_the_library_imports_the_cli() -> None:
    for path in PACKAGE.rglob("*.py"):
        if "cli" in path.relative_to(PACKAGE).parts or path.name == "__main__.py":
            continue
        names = imports_of(path)
        assert not any("cli" in n.split(".") for n in names), f"{path} imports the CLI"


def test_the_public_surface_is_sorted_and_importable() -> None:
    exported = rainier_queue.__all__
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(rainier_queue, name), name
