# SPDX-License-Identifier: MIT
"""True/false options as people write them in URLs and config files.

`?migrate=false` in a URL arrives as the text `false`, and TOML gives a real
boolean; both must mean the same, and anything else (`migrate=flase`) must
be refused, not read as "no".
"""

from __future__ import annotations

from .errors import ConfigurationError

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def parse_flag(value: object, *, setting: str) -> bool:
    """Read `value` as true or false, or say how to write one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ConfigurationError(f"`{setting}` must be true or false, not {value!r}")
