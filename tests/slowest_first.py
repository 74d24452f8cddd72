# SPDX-License-Identifier: MIT
"""Hand the test processes the longest files first.

Why: `scripts/pytest.sh` runs the suite in pytest-xdist processes, a file to
a process, each process asking for the next file when it runs short. A run
lasts as long as its busiest process, and a file of several minutes handed
out near the end (pytest-xdist's own order puts files with many tests first,
and the fault files have few, long ones) keeps one process busy after the
others are done: a run of 25 minutes had 4 of them alone. Longest first is
the classic answer to spreading jobs of known length over a few machines.

The lengths are `file_seconds.json`: each file's seconds in one run of the
whole suite, written by this module from that run's JUnit XML:

    .venv/bin/pytest ... --junitxml=run.xml
    .venv/bin/python -m tests.slowest_first run.xml

They only order the files; a file missing from them (a new one) goes after
every file that is in them, and stale numbers cost time, never a result.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SECONDS = Path(__file__).with_name("file_seconds.json")
ROOT = Path(__file__).resolve().parents[1]


def _seconds() -> dict[str, float]:
    try:
        found = json.loads(SECONDS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in found.items()} if isinstance(found, dict) else {}


def order(items: list[pytest.Item]) -> None:
    """Put the items of the longest files first, in place; a file's own order is kept."""
    seconds = _seconds()
    if not seconds:
        return
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


def _file_of(classname: str) -> str | None:
    """`tests/cli/test_work.py` for `tests.cli.test_work` (or a class in it)."""
    parts = classname.split(".")
    while parts:
        path = "/".join(parts) + ".py"
        if (ROOT / path).is_file():
            return path
        parts.pop()
    return None


def from_junit(report: Path) -> dict[str, float]:
    """Each test file's seconds in the run `report` (JUnit XML) describes."""
    totals: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        path = _file_of(case.get("classname", ""))
        if path is not None:
            totals[path] = totals.get(path, 0.0) + float(case.get("time", "0") or 0)
    return {path: round(total, 1) for path, total in sorted(totals.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.slowest_first RUN.xml  (a whole run's --junitxml)")
        return 2
    try:
        totals = from_junit(Path(argv[0]))
    except (OSError, ET.ParseError) as error:
        print(f"cannot read {argv[0]} as JUnit XML: {error}")
        return 1
    SECONDS.write_text(json.dumps(totals, indent=1) + "\n", encoding="utf-8")
    print(f"{len(totals)} files, {sum(totals.values()):.0f} s in all, written to {SECONDS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
