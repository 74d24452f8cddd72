# SPDX-License-Identifier: MIT
"""`${NAME}` in a config file, replaced from an environment the caller hands over.

Credentials do not belong in `pyproject.toml`, which is committed; they come
from the environment of the process that runs. The library never reads the
environment on its own (DESIGN decision 8), so the caller passes it in (the
CLI passes its own). A name that is not set is an error that names it and
the file, never an empty string that turns into a confusing connection
failure later. `$${` stands for a literal `${`.

Two of the shell's forms give a fallback, with the shell's meaning, since
that is what users write:

| Form | Value |
|---|---|
| `${NAME}` | the variable; an error if it is not set |
| `${NAME:-fallback}` | the variable, or `fallback` if it is not set or is empty |
| `${NAME-fallback}` | the variable (even empty), or `fallback` if it is not set |

Any other shell form (`${NAME:?}`, `${NAME:+x}`, `${NAME=x}`, a nested
`${...}` in a fallback) is refused by name rather than passed through as
text that turns into a confusing error far from the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import ConfigurationError

_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_PLAIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:-|-)(.*))?", re.DOTALL)
FORMS = "${NAME}, ${NAME:-fallback} or ${NAME-fallback}"


def interpolate(
    data: Any,
    environ: Mapping[str, str] | None,
    *,
    source: str,
    unset: list[str] | None = None,
) -> Any:
    """`data` (parsed TOML) with every `${NAME}` in its strings replaced from `environ`.

    A name that is not set (and has no fallback) is an error, unless the
    caller passes an `unset` list: the name is then added to it and its
    reference left as it was, for a caller that resolves parts of a file
    only when they are used.
    """
    if isinstance(data, str):
        return _in_string(data, environ, source, unset)
    if isinstance(data, Mapping):
        return {
            key: interpolate(value, environ, source=source, unset=unset)
            for key, value in data.items()
        }
    if isinstance(data, list):
        return [interpolate(value, environ, source=source, unset=unset) for value in data]
    return data


def unset_error(names: list[str], source: str, *, environ_given: bool = True) -> str:
    """The message for variables in `source` that are not set."""
    listed = ", ".join(f"`{name}` (as ${{{name}}})" for name in dict.fromkeys(names))
    variables = "variable" if len(set(names)) == 1 else "variables"
    if not environ_given:
        return (
            f"{source} names the environment {variables} {listed}, but no environment was "
            "given to read it from: load it with environ=os.environ"
        )
    return (
        f"{source} names the environment {variables} {listed}, which "
        f"{'is' if variables == 'variable' else 'are'} not set; set it, give a fallback "
        "(${NAME:-fallback}), or write the value in the file"
    )


def _in_string(
    text: str, environ: Mapping[str, str] | None, source: str, unset: list[str] | None
) -> str:
    def replace(match: re.Match[str]) -> str:
        inside = match.group(1)
        if inside is None:
            return "${"
        plain = _PLAIN.fullmatch(inside)
        if plain is None or "${" in (plain.group(3) or ""):
            raise ConfigurationError(
                f"{source} has `${{{_shown(inside)}}}`, a form of variable this config does "
                f"not take; write {FORMS} (`$${{` for a literal `${{`)"
            )
        name, operator, fallback = plain.groups()
        value = None if environ is None else environ.get(name)
        if operator == ":-" and not value:
            return str(fallback)
        if operator == "-" and value is None:
            return str(fallback)
        if value is not None:
            return value
        if unset is not None:
            unset.append(name)
            return match.group(0)
        raise ConfigurationError(unset_error([name], source, environ_given=environ is not None))

    return _REFERENCE.sub(replace, text)


def _shown(inside: str) -> str:
    """The reference as the message shows it: the name and operator, never a value."""
    head = re.match(r"[A-Za-z0-9_]*[^A-Za-z0-9_]{0,2}", inside)
    shown = head.group(0) if head else ""
    return shown + ("..." if len(shown) < len(inside) else "")


__all__ = ["FORMS", "interpolate", "unset_error"]
