# SPDX-License-Identifier: MIT
"""Typed job fields to JSON and back, checked on both sides.

A bad argument should fail in the web request that dispatched the job, not
hours later in a worker, so a job's fields are checked against their type
hints when the job is built. On the worker's side the stored JSON is
checked again on the way back in: a payload written by an older version of
the job that no longer fits is a clear `PayloadError`, not an
`AttributeError` deep in a handler.

Supported field types: `str`, `int`, `float`, `bool`, `None`, `Any`,
`list[T]`, `tuple[T, ...]`, `dict[str, T]`, unions (`T | None`), `Literal`,
`Enum`, `datetime`, `date`, `UUID`, `Decimal`, and dataclasses built from
those. Anything else is refused when the job class is defined.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, Union, get_args, get_origin
from uuid import UUID

from .errors import PayloadError

JSONValue = Any


class _Mismatch(Exception):
    """Internal: a value did not fit its type; carries the path to the value."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


_SCALARS: tuple[type, ...] = (str, int, float, bool, type(None))


def check_supported(tp: Any, where: str) -> None:
    """Refuse, at class definition, a field type this module cannot carry as JSON."""
    if tp is Any or tp is object or tp in _SCALARS or tp is None:
        return
    if tp in (datetime, date, UUID, Decimal):
        return
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            check_supported(hints[f.name], f"{where}.{f.name}")
        return
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return
    if origin in (Union, types.UnionType):
        for arg in args:
            check_supported(arg, where)
        return
    if origin in (list, tuple, set, frozenset):
        for arg in args:
            if arg is not Ellipsis:
                check_supported(arg, where)
        return
    if origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"{where}: JSON object keys are strings; use dict[str, ...]")
        if args:
            check_supported(args[1], where)
        return
    raise TypeError(
        f"{where}: a field of type {tp!r} cannot travel as JSON; use str, int, float, bool, "
        "list, dict[str, ...], a Literal, an Enum, datetime, UUID, Decimal or a dataclass"
    )


def to_json(value: Any, tp: Any, path: str = "") -> JSONValue:
    """`value`, checked against `tp`, as a JSON-ready value. Raises `_Mismatch`."""
    # The common case first: a plain scalar of exactly its declared type.
    # Every job's fields pass through here twice per run, so this matters.
    if (tp is str or tp is int or tp is bool) and type(value) is tp:
        return value
    if tp is Any or tp is object:
        _require_json(value, path)
        return value
    if tp is None or tp is type(None):
        if value is not None:
            raise _Mismatch(path, f"expected None, got {type(value).__name__}")
        return None
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (Union, types.UnionType):
        errors: list[_Mismatch] = []
        for arg in args:
            try:
                return to_json(value, arg, path)
            except _Mismatch as exc:
                errors.append(exc)
        raise _closest(errors, path)
    if origin is Literal:
        if value not in args:
            raise _Mismatch(path, f"expected one of {list(args)!r}, got {value!r}")
        return value.value if isinstance(value, enum.Enum) else value
    if origin in (list, tuple, set, frozenset):
        if not isinstance(value, list | tuple | set | frozenset):
            raise _Mismatch(path, f"expected a list, got {type(value).__name__}")
        item_types = _item_types(tp, len(value), path)
        return [
            to_json(v, t, f"{path}[{i}]")
            for i, (v, t) in enumerate(zip(value, item_types, strict=True))
        ]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Mismatch(path, f"expected a dict, got {type(value).__name__}")
        item = args[1] if args else Any
        out: dict[str, JSONValue] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _Mismatch(path, f"dict keys must be strings, got {type(k).__name__}")
            out[k] = to_json(v, item, f"{path}[{k!r}]")
        return out
    if tp is bool:
        if not isinstance(value, bool):
            raise _Mismatch(path, f"expected bool, got {type(value).__name__}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Mismatch(path, f"expected int, got {type(value).__name__}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Mismatch(path, f"expected float, got {type(value).__name__}")
        if value != value or value in (float("inf"), float("-inf")):
            raise _Mismatch(path, "NaN and infinity have no JSON form")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _Mismatch(path, f"expected str, got {type(value).__name__}")
        return value
    if tp is datetime:
        if not isinstance(value, datetime):
            raise _Mismatch(path, f"expected datetime, got {type(value).__name__}")
        return value.isoformat()
    if tp is date:
        if not isinstance(value, date) or isinstance(value, datetime):
            raise _Mismatch(path, f"expected date, got {type(value).__name__}")
        return value.isoformat()
    if tp is UUID:
        if not isinstance(value, UUID):
            raise _Mismatch(path, f"expected UUID, got {type(value).__name__}")
        return str(value)
    if tp is Decimal:
        if not isinstance(value, Decimal):
            raise _Mismatch(path, f"expected Decimal, got {type(value).__name__}")
        return str(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if not isinstance(value, tp):
            raise _Mismatch(path, f"expected {tp.__name__}, got {type(value).__name__}")
        return value.value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, tp):
            raise _Mismatch(path, f"expected {tp.__name__}, got {type(value).__name__}")
        return dataclass_to_json(value, path)
    raise _Mismatch(path, f"unsupported type {tp!r}")


def from_json(data: JSONValue, tp: Any, path: str = "") -> Any:
    """A JSON value read back as `tp`. Raises `_Mismatch`."""
    if (tp is str or tp is int or tp is bool) and type(data) is tp:
        return data
    if tp is Any or tp is object:
        return data
    if tp is None or tp is type(None):
        if data is not None:
            raise _Mismatch(path, f"expected null, got {_json_kind(data)}")
        return None
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (Union, types.UnionType):
        errors: list[_Mismatch] = []
        for arg in args:
            try:
                return from_json(data, arg, path)
            except _Mismatch as exc:
                errors.append(exc)
        raise _closest(errors, path)
    if origin is Literal:
        for arg in args:
            raw = arg.value if isinstance(arg, enum.Enum) else arg
            if raw == data and type(raw) is type(data):
                return arg
        raise _Mismatch(path, f"expected one of {list(args)!r}, got {data!r}")
    if origin in (list, tuple, set, frozenset):
        if not isinstance(data, list):
            raise _Mismatch(path, f"expected an array, got {_json_kind(data)}")
        item_types = _item_types(tp, len(data), path)
        items = [
            from_json(v, t, f"{path}[{i}]")
            for i, (v, t) in enumerate(zip(data, item_types, strict=True))
        ]
        maker: Callable[[list[Any]], Any] = origin
        return maker(items)
    if origin is dict:
        if not isinstance(data, dict):
            raise _Mismatch(path, f"expected an object, got {_json_kind(data)}")
        item = args[1] if args else Any
        return {k: from_json(v, item, f"{path}[{k!r}]") for k, v in data.items()}
    if tp in (datetime, date, UUID, Decimal):
        if not isinstance(data, str):
            raise _Mismatch(path, f"expected a {tp.__name__} string, got {_json_kind(data)}")
        try:
            if tp is datetime:
                return datetime.fromisoformat(data)
            if tp is date:
                return date.fromisoformat(data)
            if tp is UUID:
                return UUID(data)
            return Decimal(data)
        except (ValueError, InvalidOperation) as exc:
            raise _Mismatch(path, f"not a {tp.__name__}: {data!r}") from exc
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise _Mismatch(path, f"{data!r} is not a {tp.__name__}") from exc
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return dataclass_from_json(tp, data, path)
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    return to_json(data, tp, path)  # scalars: the same check both ways


_FieldInfo = tuple[tuple[str, Any, "dataclasses.Field[Any]"], ...]
_FIELDS: dict[type[Any], _FieldInfo] = {}


def _fields_of(cls: type[Any]) -> _FieldInfo:
    """(name, resolved hint, field) for each dataclass field, worked out once per class.

    Resolving hints is far slower than checking a value against them, and it
    would otherwise happen for every job dispatched and every job run.
    """
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = tuple((f.name, hints[f.name], f) for f in dataclasses.fields(cls))
    return found


def dataclass_to_json(value: Any, path: str = "") -> dict[str, JSONValue]:
    """A dataclass instance's fields as a JSON object, each checked against its hint."""
    return {
        name: to_json(getattr(value, name), hint, _join(path, name))
        for name, hint, _ in _fields_of(type(value))
    }


def dataclass_from_json(cls: type[Any], data: JSONValue, path: str = "") -> Any:
    """Build `cls` from a JSON object, refusing unknown and missing fields."""
    if not isinstance(data, dict):
        raise _Mismatch(path, f"expected an object of fields, got {_json_kind(data)}")
    fields = [entry for entry in _fields_of(cls) if entry[2].init]
    unknown = sorted(set(data) - {name for name, _, _ in fields})
    if unknown:
        raise _Mismatch(path, "unknown field(s) " + ", ".join(f"`{k}`" for k in unknown))
    kwargs: dict[str, Any] = {}
    for name, hint, f in fields:
        if name in data:
            kwargs[name] = from_json(data[name], hint, _join(path, name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _Mismatch(_join(path, name), "missing required field")
    return cls(**kwargs)


def mismatch_error(prefix: str, exc: _Mismatch) -> PayloadError:
    """Turn an internal mismatch into a `PayloadError` that points at the field."""
    where = f" at `{exc.path}`" if exc.path else ""
    return PayloadError(f"{prefix}{where}: {exc.message}")


def _item_types(tp: Any, length: int, path: str) -> list[Any]:
    args = get_args(tp)
    if get_origin(tp) is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
        if len(args) != length:
            raise _Mismatch(path, f"expected {len(args)} items, got {length}")
        return list(args)
    return [args[0] if args else Any] * length


def _closest(errors: list[_Mismatch], path: str) -> _Mismatch:
    """Of a union's failed branches, the one that got furthest into the value.

    `list[str] | None` given `["a", 2]` should point at item 1, not say
    "expected None" about the whole list.
    """
    deepest = max(errors, key=lambda e: len(e.path))
    if len(deepest.path) > len(path):
        return deepest
    return _Mismatch(path, " or ".join(dict.fromkeys(e.message for e in errors)))


def _require_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Mismatch(path, "NaN and infinity have no JSON form")
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _require_json(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise _Mismatch(path, "dict keys must be strings")
            _require_json(v, f"{path}[{k!r}]")
        return
    raise _Mismatch(path, f"a {type(value).__name__} has no JSON form")


def _json_kind(data: JSONValue) -> str:
    if data is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(data), "a number"
    )


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
