# SPDX-License-Identifier: MIT
"""What the slow path of a payload check needs: the type at a path, its choices, durations.

A payload that does not fit its job is fixed by a person, and one who
learns of one problem per attempt needs as many attempts as there are
problems. So when the one fast conversion of a payload fails (`payload.py`),
each field is converted again on its own and every problem is listed, with
the allowed values where the type is an Enum or a Literal. Only failures
pay for this; a payload that fits is converted once, as before.

The same path reads durations as people write them: a `timedelta` field
takes `"30s"`, `"5m"` or `"1h30m"` as well as ISO 8601 (`"PT30S"`), as
`--delay` does. Such a payload fails the fast conversion and is read here.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from datetime import timedelta
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from .durations import parse_duration
from .errors import ConfigurationError

DURATION_FORMS = 'an ISO 8601 duration such as "PT30S", or "30s", "5m", "1h30m"'
_STEP = re.compile(r"\[[^\]]*\]|\.?([^.\[]+)")
_MAX_SHOWN = 20


def with_durations(value: Any, tp: Any) -> Any:
    """`value` with each text under a `timedelta` of `tp` written as `30s` made a timedelta."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is timedelta:
        if isinstance(value, str) and not value.lstrip("+-").upper().startswith("P"):
            try:
                return parse_duration(value)
            except ConfigurationError:
                return value
        return value
    if origin is Annotated:
        return with_durations(value, args[0])
    if origin in (Union, types.UnionType):
        for arg in args:
            done = with_durations(value, arg)
            if done is not value:
                return done
        return value
    if origin in (list, set, frozenset) and isinstance(value, list):
        return [with_durations(item, args[0]) for item in value]
    if origin is tuple and isinstance(value, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return [with_durations(item, args[0]) for item in value]
        return [with_durations(item, arg) for item, arg in zip(value, args, strict=False)]
    if origin is dict and isinstance(value, dict):
        return {key: with_durations(item, args[1]) for key, item in value.items()}
    if isinstance(value, dict):
        hints = _field_hints(tp)
        if hints:
            return {k: with_durations(v, hints[k]) if k in hints else v for k, v in value.items()}
    return value


def type_at(tp: Any, path: str) -> Any:
    """The type of the value at `path` (`lines[0].size`, below a field of type `tp`), or None."""
    for step in _STEP.finditer(path):
        tp = _step(tp, step.group(1))
        if tp is None:
            return None
    return _bare(tp)


def choices(tp: Any) -> str | None:
    """The JSON values an Enum or Literal type allows, listed; None for other types."""
    tp = _bare(tp)
    members = getattr(tp, "enum", None)  # the stand-in of an Enum (`payload_types.EnumMember`)
    if isinstance(members, type) and issubclass(members, enum.Enum):
        tp = members
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
    elif get_origin(tp) is Literal:
        values = list(get_args(tp))
    else:
        return None
    shown = ", ".join(json.dumps(value, default=str) for value in values[:_MAX_SHOWN])
    return shown + (", ..." if len(values) > _MAX_SHOWN else "")


def _step(tp: Any, name: str | None) -> Any:
    tp = _bare(tp)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        found = [_step(arg, name) for arg in args if arg is not type(None)]
        known = [each for each in found if each is not None]
        return known[0] if len(known) == 1 else None
    if name is None:  # an index, or a dict's key
        if origin in (list, set, frozenset) or (origin is tuple and args[-1:] == (Ellipsis,)):
            return args[0]
        if origin is dict:
            return args[1]
        return None
    return _field_hints(tp).get(name)


def _bare(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _field_hints(tp: Any) -> dict[str, Any]:
    """The fields of a dataclass, TypedDict or msgspec struct `tp`; empty for others."""
    is_record = isinstance(tp, type) and (
        dataclasses.is_dataclass(tp) or typing.is_typeddict(tp) or hasattr(tp, "__struct_fields__")
    )
    if not is_record:
        return {}
    try:
        return typing.get_type_hints(tp)
    except (NameError, TypeError):
        return {}


__all__ = ["DURATION_FORMS", "choices", "type_at", "with_durations"]
