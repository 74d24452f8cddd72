# SPDX-License-Identifier: MIT
"""Durations as people write them in URLs, config files and CLI flags.

The API takes `timedelta`. Text takes a number with a unit (`90s`, `5m`,
`250ms`, `1h30m`) or a bare number of seconds, so no setting is an integer
of unknown unit.
"""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import ConfigurationError

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str | float | timedelta, *, setting: str = "duration") -> timedelta:
    """Read `value` as a duration, or say how to write one."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ConfigurationError(f"`{setting}` must be a duration such as `30s`, not {value!r}")
    elif isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNITS[match.group(2)]
                pos = match.end()
            if pos != len(text) or not text:
                raise ConfigurationError(
                    f"`{setting}` = {value!r} is not a duration; write a number of seconds "
                    "or a number with a unit, such as `250ms`, `30s`, `5m`, `1h30m`"
                ) from None
    if seconds < 0:
        raise ConfigurationError(f"`{setting}` cannot be negative (got {value!r})")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """A short human form: `90s`, `1.5s`, `250ms`."""
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


def human_duration(value: timedelta) -> str:
    """A duration rounded for a person reading a log: `0.97s`, `12s`, `1m30s`, `2h5m`.

    Backoff delays carry jitter, so their exact value (`0.96752s`) is noise;
    two significant figures under ten seconds, whole seconds above.
    """
    seconds = value.total_seconds()
    if seconds <= 0:
        return "0s"
    if seconds < 10:
        return f"{seconds:.2g}s" if seconds >= 0.01 else f"{seconds * 1000:.2g}ms"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"
