# SPDX-License-Identifier: MIT
"""Worker settings written in a config file, next to the connection they serve.

A deployment runs the same worker command on many machines; the settings
that belong to the queue rather than to one machine (which queues, how many
at once, how long a job may run, how long to wait at a stop) are better
kept in the config with the connection than repeated in every unit file.
This reads such a table into `WorkerOptions` keyword arguments, refusing a
key the worker does not have with a "did you mean", so a typo fails when
the file is read rather than being silently ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..durations import parse_duration
from ..errors import ConfigurationError, UnknownOption
from .options import WorkerOptions

_DURATIONS = frozenset(
    {
        "sleep",
        "timeout",
        "max_time",
        "grace",
        "max_error_backoff",
        "batch_wait",
        "drain_wait",
        "pause_check",
        "heartbeat",
        "keep_succeeded",
    }
)
_COUNTS = frozenset(
    {"concurrency", "tries", "max_jobs", "max_consecutive_errors", "prefetch", "reserve_ahead"}
)
KEYS = frozenset(field.name for field in dataclasses.fields(WorkerOptions))
"""Every key a `worker` table may hold: the fields of `WorkerOptions`."""


def worker_settings(table: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """`table` checked and converted into `WorkerOptions` keyword arguments."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise UnknownOption(where, key, KEYS)
        out[key] = _converted(key, value, where)
    return out


def _converted(key: str, value: Any, where: str) -> Any:
    if key in _DURATIONS:
        if key in ("timeout", "heartbeat", "keep_succeeded") and value in (0, "0", "0s"):
            return None  # as on the command line: no run limit, no heartbeat, no records
        return parse_duration(value, setting=f"{where}: {key}")
    if key in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{where}: `{key}` must be a whole number, not {value!r}")
        return value
    if key == "queues":
        names = value.split(",") if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigurationError(f"{where}: `queues` must be a list of queue names")
        return tuple(n.strip() for n in names if n.strip())
    if key == "stop_when_empty":
        if not isinstance(value, bool):
            raise ConfigurationError(f"{where}: `stop_when_empty` must be true or false")
        return value
    return value  # pragma: no cover - every field is one of the kinds above


__all__ = ["KEYS", "worker_settings"]
