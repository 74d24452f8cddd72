# SPDX-License-Identifier: MIT
"""Which field types a job may declare, and the shape each is checked against.

A job's fields travel as JSON, so a type without a JSON form must be refused
when the job class is defined, not when the first job of it fails in a
worker. This module is the gate: `check_shape` walks a declared type and
either refuses it (naming the field and what to use instead) or returns the
*shape* dispatch checks values against. The shape is the declared type with
two things made explicit that `msgspec` would otherwise let through: floats
must be finite (JSON has no NaN or infinity), and dataclasses refuse fields
they do not declare. The mapping of each type to JSON is the table in
`docs/payloads.md`.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin
from uuid import UUID

import msgspec

FiniteFloat = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
"""A float that JSON can hold: NaN and the infinities fail its bounds."""

NATIVE: tuple[type, ...] = (datetime, date, time, timedelta, UUID, Decimal, bytes, bytearray)
"""Types carried as JSON text, each in one fixed form (see docs/payloads.md)."""

_SCALARS: tuple[object, ...] = (str, int, bool, type(None), None)
_ARRAYS: tuple[object, ...] = (list, tuple, set, frozenset)

_WHAT_TO_USE = (
    "use str, int, float, bool, None, a Literal, an Enum, datetime, date, time, timedelta, "
    "UUID, Decimal, bytes, list, tuple, set, dict[str, ...], a dataclass, a TypedDict or a "
    "pydantic model (see docs/payloads.md)"
)


def is_pydantic_model(tp: object) -> bool:
    """Whether `tp` is a pydantic model class; never imports pydantic to find out."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


class _MemberOf(type):
    """Makes `isinstance(Size.SMALL, enum_shape(Size))` true: msgspec asks it of the hook."""

    def __instancecheck__(cls, value: object) -> bool:
        return isinstance(value, cls.enum)  # type: ignore[attr-defined]


class EnumMember(metaclass=_MemberOf):
    """The shape of an Enum field: a stand-in type msgspec hands to the decode hook.

    msgspec cannot check a member of a plain Enum with integer values against
    its own class ("expected `int`, got `Size`"), so the check is ours: the
    value must be a member of `enum` (see `payload._decode_other`).
    """

    enum: ClassVar[type[enum.Enum]]


_ENUM_SHAPES: dict[type[enum.Enum], type[EnumMember]] = {}


def enum_shape(members: type[enum.Enum]) -> type[EnumMember]:
    """The stand-in for `members`, made once per Enum."""
    shape = _ENUM_SHAPES.get(members)
    if shape is None:
        namespace = {"enum": members, "__module__": __name__}
        shape = _ENUM_SHAPES[members] = type(members.__name__, (EnumMember,), namespace)
    return shape


def check_shape(tp: Any, where: str) -> Any:
    """The shape values of `tp` are checked against; `TypeError` naming `where` if none."""
    return _Shapes().of(tp, where)


class _Shapes:
    """One walk over a type, remembering the dataclasses it has mirrored (and is mirroring)."""

    def __init__(self) -> None:
        self._mirrors: dict[type, Any] = {}

    def of(self, tp: Any, where: str) -> Any:
        if tp is Any or tp is object:
            return Any
        if tp is float:
            return FiniteFloat
        if tp in _SCALARS or tp in NATIVE:
            return tp
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return enum_shape(tp)
        if hasattr(tp, "__supertype__"):  # a NewType
            return self.of(tp.__supertype__, where)
        if is_pydantic_model(tp):
            return tp  # pydantic checks its own fields
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self._dataclass(tp, where)
        if typing.is_typeddict(tp):
            return self._typeddict(tp, where)
        if tp in _ARRAYS:
            return tp[Any]
        if tp is dict:
            return dict[str, Any]
        return self._generic(tp, where)

    def _generic(self, tp: Any, where: str) -> Any:
        origin, args = get_origin(tp), get_args(tp)
        if origin is Annotated:
            return self.of(args[0], where)
        if origin is Literal:
            return tp
        if origin in (Union, types.UnionType):
            return Union[tuple(self.of(arg, where) for arg in args)]  # noqa: UP007
        if origin is tuple:
            return tuple[tuple(arg if arg is Ellipsis else self.of(arg, where) for arg in args)]  # type: ignore[misc]
        if origin in (list, set, frozenset):
            return origin[self.of(args[0], f"{where}[]")]
        if origin is dict:
            if args[0] is not str:
                raise TypeError(
                    f"{where}: JSON object keys are text, so a dict field is dict[str, ...], "
                    f"not {tp!r}"
                )
            return dict[str, self.of(args[1], f"{where}[]")]  # type: ignore[misc]
        raise TypeError(f"{where}: a field of type {tp!r} cannot travel as JSON; {_WHAT_TO_USE}")

    def _typeddict(self, tp: Any, where: str) -> Any:
        """The TypedDict with its values' shapes, keeping which keys are required."""
        hints = typing.get_type_hints(tp)
        shaped = {name: self.of(hint, f"{where}.{name}") for name, hint in hints.items()}
        mirror: Any = typing.TypedDict(tp.__name__, shaped, total=False)  # type: ignore[misc]
        mirror.__required_keys__ = tp.__required_keys__
        mirror.__optional_keys__ = tp.__optional_keys__
        return mirror

    def _dataclass(self, tp: type, where: str) -> Any:
        if tp in self._mirrors:
            # A dataclass that holds itself: below the first level it is checked
            # by msgspec as declared (finiteness of its floats included only once).
            return self._mirrors[tp] or tp
        self._mirrors[tp] = None
        hints = typing.get_type_hints(tp)
        fields = [
            (f.name, self.of(hints[f.name], f"{where}.{f.name}")) for f in dataclasses.fields(tp)
        ]
        mirror = msgspec.defstruct(
            tp.__name__, fields, kw_only=True, forbid_unknown_fields=True, module=__name__
        )
        self._mirrors[tp] = mirror
        return mirror


__all__ = ["NATIVE", "EnumMember", "FiniteFloat", "check_shape", "enum_shape", "is_pydantic_model"]
