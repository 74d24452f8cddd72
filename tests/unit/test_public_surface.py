# SPDX-License-Identifier: MIT
"""The public surface: what `rainier_queue` exports, sorted and importable.

The layering rules that used to be checked here by reading imports by hand
(the core imports no driver, nothing imports the CLI) are import-linter
contracts now, in `pyproject.toml`, run by `lint-imports` in `make check`.
"""

from __future__ import annotations

import rainier_queue


def test_the_public_surface_is_sorted_and_importable() -> None:
    exported = rainier_queue.__all__
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(rainier_queue, name), name
