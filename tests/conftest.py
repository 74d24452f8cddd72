# SPDX-License-Identifier: MIT
"""Shared test plumbing: where services are, and what happens when one is missing.

A missing service is skipped on a laptop and fails where it is required
(`RAINIER_QUEUE_REQUIRE_SERVICES=1`, which CI sets): a suite that silently
skips in CI reports a driver nobody ran as passing.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_SERVICES = os.environ.get("RAINIER_QUEUE_REQUIRE_SERVICES") == "1"


def unreachable(service: str, error: Exception | str) -> NoReturn:
    """Skip (or, where services are required, fail) a test whose service is missing."""
    if REQUIRE_SERVICES:
        pytest.fail(
            f"{service} is required here (RAINIER_QUEUE_REQUIRE_SERVICES=1) and failed: {error}"
        )
    pytest.skip(
        f"no {service} reachable ({error}); start it or set RAINIER_QUEUE_REQUIRE_SERVICES=1"
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip contract and fault tests on drivers that lack a hook they need (with its reason),
    and keep each file whose tests share a module's fixture in one process."""
    from .contract.backends import mark_collected

    mark_collected(items)
    keep_sharers_together(items)


def keep_sharers_together(items: list[pytest.Item]) -> None:
    """Put a test that uses a module- or class-scoped fixture in its file's `xdist_group`.

    The suite is spread over its processes a test at a time (scripts/pytest.sh
    says why), so a file's tests may run in several processes. A fixture
    scoped to a module (a TLS server, a Redis cluster, a browser) would then
    start once in each; grouped, it starts once.
    """
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        scopes = {d.scope for defs in info.name2fixturedefs.values() for d in defs}
        if scopes & {"module", "class", "package"}:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
