# SPDX-License-Identifier: MIT
"""The suite's file order for its test processes: longest files first, each file whole."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import slowest_first


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_the_longest_files_go_first_and_each_keeps_its_own_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slowest_first, "_seconds", lambda: {"tests/a.py": 1.0, "tests/b.py": 300.0})
    items = _items(
        "tests/a.py::one",
        "tests/a.py::two",
        "tests/new.py::x",
        "tests/b.py::k[1]",
        "tests/b.py::k[2]",
    )
    slowest_first.order(items)
    assert [i.nodeid for i in items] == [
        "tests/b.py::k[1]",
        "tests/b.py::k[2]",
        "tests/a.py::one",
        "tests/a.py::two",
        "tests/new.py::x",  # not measured yet: after every file that was
    ]


def test_a_junit_report_gives_each_file_its_seconds(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="tests.unit.test_slowest_first" name="a" time="1.25"/>'
        '<testcase classname="tests.unit.test_slowest_first" name="b" time="2.5"/>'
        '<testcase classname="tests.no_such_module" name="c" time="9"/>'
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    assert slowest_first.from_junit(report) == {"tests/unit/test_slowest_first.py": 3.8}
