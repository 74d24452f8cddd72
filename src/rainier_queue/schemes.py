# SPDX-License-Identifier: MIT
"""The scheme of a connection URL, the key both the queue drivers and the lock stores are
found by.

It sits below both registries (`drivers/__init__.py` and `cache/stores.py`)
so that neither has to import the other to read a URL.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .errors import ConfigurationError
from .redact import redact_url

BARE_NAMES = frozenset({"memory", "sync", "inline"})
"""Drivers that may be named without `://` (`memory`, not `memory://`)."""


def scheme_of(url: str) -> str:
    """The URL's scheme (`memory`, `sqlite`, ...), or a clear error for a URL without one."""
    if url in BARE_NAMES:
        return url
    scheme = urlsplit(url).scheme.lower()
    if not scheme:
        raise ConfigurationError(
            "a queue URL needs a scheme such as `sqlite:///jobs.db` or `memory://`; "
            f"got {redact_url(url)!r}"
        )
    return scheme


__all__ = ["BARE_NAMES", "scheme_of"]
