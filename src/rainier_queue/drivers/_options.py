# SPDX-License-Identifier: MIT
"""Driver options that arrive two ways: in the URL's query and in the config table.

`sqlite:///jobs.db?lease=30s` and `{url = "sqlite:///jobs.db", lease = "30s"}`
must mean the same, the table winning where both say something, and a key
the driver does not take must be refused from either place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UnknownOption


def merge_options(
    query: Mapping[str, str], options: Mapping[str, Any], known: frozenset[str], where: str
) -> dict[str, Any]:
    """The URL's query options overridden by the config's, each checked against `known`."""
    merged: dict[str, Any] = {**query, **options}
    for key in merged:
        if key not in known:
            raise UnknownOption(where, key, known)
    return merged
