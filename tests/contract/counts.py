# SPDX-License-Identifier: MIT
"""How many contract and fault tests each driver runs, and why it skips the rest.

    python -m tests.contract.counts [paths...]   (default: tests/contract tests/faults)

Collects the tests as pytest does (`--collect-only`, nothing is run) and,
for each driver of tests/contract/backends.py, counts the tests it is given,
the ones it skips for a hook it lacks (with the driver's reason, as pytest
shows it) and the ones it is known to fail (strict xfails, with theirs).
Skips a test makes at run time (a service that is not there) are not
counted: on CI, which requires every service, there are none.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections import Counter, defaultdict

import pytest

from .backends import BACKENDS


class _Tally:
    """A pytest plugin that keeps what was collected, per path and driver."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.given: Counter[tuple[str, str]] = Counter()
        self.skipped: defaultdict[tuple[str, str], defaultdict[str, list[str]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.failing: defaultdict[tuple[str, str], defaultdict[str, list[str]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            callspec = getattr(item, "callspec", None)
            driver = callspec.params.get("backend") if callspec is not None else None
            if driver not in BACKENDS:
                continue
            where = next((p for p in self.paths if item.nodeid.startswith(p)), item.nodeid)
            key = (where, str(driver))
            self.given[key] += 1
            name = getattr(item, "originalname", item.name)
            skip = item.get_closest_marker("skip")
            if skip is not None:
                self.skipped[key][str(skip.kwargs.get("reason", ""))].append(name)
                continue
            xfail = item.get_closest_marker("xfail")
            if xfail is not None:
                self.failing[key][str(xfail.kwargs.get("reason", ""))].append(name)


def report(paths: list[str]) -> tuple[int, str]:
    """Collect `paths`; pytest's exit code and the report."""
    tally = _Tally(paths)
    with contextlib.redirect_stdout(io.StringIO()) as collected:
        # rainier_queue is imported already (by .backends): its pytest plugin cannot be
        # rewritten for assertions, which only matters to tests, not to collecting them.
        quiet = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
        args = ["--collect-only", "-q", "-p", "no:cacheprovider", *quiet, *paths]
        code = pytest.main(args, [tally])
    if code != 0:
        return int(code), collected.getvalue()
    lines: list[str] = []
    for path in paths:
        drivers = sorted(d for p, d in tally.given if p == path)
        if not drivers:
            continue
        most = max(tally.given[(path, d)] for d in drivers)
        lines.append(f"{path}: every driver is given {most} tests")
        for driver in drivers:
            key = (path, driver)
            skipped = sum(len(names) for names in tally.skipped[key].values())
            failing = sum(len(names) for names in tally.failing[key].values())
            runs = tally.given[key] - skipped
            line = f"  {driver:<14} runs {runs:>3} of {tally.given[key]}"
            if failing:
                line += f" ({failing} of them strict xfails)"
            lines.append(line)
            for why, names in sorted(tally.skipped[key].items()):
                lines.append(f"      skips {len(names)}: {why}")
                lines += [f"          {n}" for n in sorted(Counter(names))]
            for why, names in sorted(tally.failing[key].items()):
                lines.append(f"      xfails {len(names)}: {why}")
                lines += [f"          {n}" for n in sorted(Counter(names))]
        lines.append("")
    return 0, "\n".join(lines)


def main(argv: list[str]) -> int:
    code, text = report(argv or ["tests/contract", "tests/faults"])
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
