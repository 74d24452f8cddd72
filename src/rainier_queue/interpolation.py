# SPDX-License-Identifier: MIT
"""`${NAME}` in a config file, replaced from an environment the caller hands over.

Credentials do not belong in `pyproject.toml`, which is committed; they come
from the environment of the process that runs. The library never reads the
environment on its own (DESIGN decision 8), so the caller passes it in (the
CLI passes its own). A name that is not set is an error that names it and
the file, never an empty string that turns into a confusing connection
failure later. `$${` stands for a literal `${`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import ConfigurationError

_VARIABLE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def interpolate(data: Any, environ: Mapping[str, str] | None, *, source: str) -> Any:
    """`data` (parsed TOML) with every `${NAME}` in its strings replaced from `environ`."""
    if isinstance(data, str):
        return _in_string(data, environ, source)
    if isinstance(data, Mapping):
        return {key: interpolate(value, environ, source=source) for key, value in data.items()}
    if isinstance(data, list):
        return [interpolate(value, environ, source=source) for value in data]
    return data


def _in_string(text: str, environ: Mapping[str, str] | None, source: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "${"
        if environ is None:
            raise ConfigurationError(
                f"{source} names the environment variable `{name}` (as ${{{name}}}), but no "
                "environment was given to read it from: load it with environ=os.environ"
            )
        if name not in environ:
            raise ConfigurationError(
                f"{source} names the environment variable `{name}` (as ${{{name}}}), which is "
                "not set; set it, or write the value in the file"
            )
        return environ[name]

    return _VARIABLE.sub(replace, text)


__all__ = ["interpolate"]
