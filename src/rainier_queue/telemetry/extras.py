# SPDX-License-Identifier: MIT
"""The error for an instrument whose client library is not installed.

Why here: metrics and tracing are optional extras, and asking for one
without it installed must say which `pip install` fixes it, never fall
back to running without it.
"""

from __future__ import annotations

from ..errors import ConfigurationError


class MissingExtra(ConfigurationError):
    """An instrument was asked for, but its client library is not installed."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the '{extra}' extra ({module} is not installed): "
            f"pip install 'rainier-queue[{extra}]'"
        )
        self.feature = feature
        self.extra = extra


__all__ = ["MissingExtra"]
