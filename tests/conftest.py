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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip contract and fault tests on drivers that lack a hook they need (with its reason),
    and put the longest files first, for the test processes (slowest_first.py)."""
    from .contract.backends import mark_collected
    from .slowest_first import order

    mark_collected(items)
    order(items)
