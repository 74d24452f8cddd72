# SPDX-License-Identifier: MIT
"""Each CLI test gets a fresh SQLite file and a `Cli` pointed at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import Cli


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def cli(db_url: str) -> Cli:
    return Cli(db_url)
