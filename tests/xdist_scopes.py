# SPDX-License-Identifier: MIT
"""How the suite is spread over its pytest-xdist processes: a test at a time, except files
whose tests share a fixture scoped wider than a test.

Handed out a file at a time (`--dist loadfile`), the suite's wall time was
that of its longest file: tests/faults/test_workers.py runs several worker
processes on every driver, and kept one process busy for most of a CI run
while the others had finished. Handed out a test at a time, a fixture
scoped to a module (a TLS server, a Redis cluster, a browser) would start in
every process that ran one of its file's tests. So a file is kept whole when
it, or a conftest.py above it, declares a fixture scoped to a module, class
or package, and every other test is a unit of its own.

`xdist_group` marks cannot say this with the pytest here: pytest-xdist
groups by a suffix it writes into each test's node id, which pytest 9 no
longer reads back. The controller collects nothing, so the files are read
as text; a file that uses such a fixture without declaring it (or having a
conftest.py above it that does) is split, which costs time, never a result.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
_WIDE = re.compile(r"""scope\s*=\s*["'](module|class|package)["']""")


@cache
def _declares_wide_fixture(path: Path) -> bool:
    try:
        return _WIDE.search(path.read_text(encoding="utf-8")) is not None
    except OSError:
        return False


@cache
def shares_fixtures(file: str) -> bool:
    """Whether the test file (a path relative to the project) or a conftest.py above it
    declares a fixture scoped wider than a test."""
    path = ROOT / file
    if _declares_wide_fixture(path):
        return True
    folder = path.parent
    while folder == ROOT or ROOT in folder.parents:
        if _declares_wide_fixture(folder / "conftest.py"):
            return True
        if folder == ROOT:
            break
        folder = folder.parent
    return False


class SharersTogether(LoadScopeScheduling):  # type: ignore[misc]
    """`loadscope` with a test as the scope, or its file where the file shares fixtures."""

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return file if shares_fixtures(file) else nodeid
