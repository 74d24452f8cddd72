# SPDX-License-Identifier: MIT
"""Typed job fields to JSON and back, checked on both sides.

A bad argument should fail in the web request that dispatched the job, not
hours later in a worker, so a job's fields are checked against their type
hints when the job is built and again when it is dispatched (a field may
have been changed in between). On the worker's side the stored JSON is read
back into the declared types: a payload written by an older version of the
job that no longer fits is a clear `PayloadError`, not an `AttributeError`
deep in a handler.

Which types a field may have, and the one JSON form of each, is the table in
`docs/payloads.md`; `payload_types` holds the gate that refuses the rest when
the job class is defined. The work itself is `msgspec`'s, in C: checking
and converting a job's fields costs a few microseconds, where the
hand-written walk it replaced cost tens (`bench.studies.payload_codecs` measures
both, and pydantic). Pydantic models are carried through their own
`model_dump` / `model_validate` when pydantic is installed; it is not a
dependency.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from datetime import timedelta
from typing import Any

import msgspec

from .errors import PayloadError
from .payload_problems import DURATION_FORMS, choices, type_at, with_durations
from .payload_types import NATIVE, EnumMember, check_shape, is_pydantic_model

JSONValue = Any


class _Mismatch(Exception):
    """Internal: a value did not fit its type; carries the path to the value."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _encode_other(value: Any) -> Any:
    """What msgspec calls for a value it has no JSON form for: pydantic models, or refuse."""
    if is_pydantic_model(type(value)):
        return value.model_dump(mode="json")
    raise TypeError(f"a {type(value).__name__} has no JSON form")


def _decode_other(tp: Any, data: Any) -> Any:
    """What msgspec calls to build a type it does not know: pydantic models, our Enum check."""
    if isinstance(tp, type) and issubclass(tp, EnumMember):
        if isinstance(data, tp.enum):
            return data
        raise ValueError(f"expected a {tp.enum.__name__}, got {type(data).__name__}")
    if is_pydantic_model(tp):
        if isinstance(data, tp):
            return data
        pydantic = __import__("pydantic")
        try:
            return tp.model_validate(data)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{tp.__name__}.{where}: {first['msg']}") from None
    raise NotImplementedError(f"{tp!r}")


_FINGERPRINT = msgspec.msgpack.Encoder(enc_hook=_encode_other)


class PayloadCodec:
    """A job class's fields, checked and converted: made once per class, used per job."""

    __slots__ = ("_cls", "_fields", "_names", "_optional", "_reading", "_required", "_shape")

    def __init__(self, cls: type[Any]) -> None:
        where = cls.__qualname__
        hints = typing.get_type_hints(cls)
        fields = dataclasses.fields(cls)
        shaped = [(f.name, check_shape(hints[f.name], f"{where}.{f.name}")) for f in fields]
        for (name, shape), f in zip(shaped, fields, strict=True):
            _require_decodable(hints[f.name], f"{where}.{name}")
            _require_decodable(shape, f"{where}.{name}")
        self._cls = cls
        self._names = frozenset(f.name for f in fields if f.init)
        self._required = [f.name for f in fields if f.init and _required(f)]
        self._fields = {
            f.name: (hints[f.name], shape) for f, (_, shape) in zip(fields, shaped, strict=True)
        }
        """Each field's declared type and shape, for the slow path that lists every problem."""
        self._optional = any(f.init and not _required(f) for f in fields)
        """Whether a field may be absent from a payload (left UNSET by `load`'s reading)."""
        # What `load` reads into: the declared types, a field with a default
        # left UNSET when absent so the class's own default applies.
        self._reading: Any = msgspec.defstruct(
            cls.__name__,
            [
                (f.name, hints[f.name])
                if _required(f)
                else (f.name, typing.Union[hints[f.name], msgspec.UnsetType], msgspec.UNSET)  # noqa: UP007
                for f in fields
                if f.init
            ],
            kw_only=True,
            module=__name__,
        )
        self._shape: Any = msgspec.defstruct(
            cls.__name__, shaped, kw_only=True, forbid_unknown_fields=True, module=__name__
        )

    def dump(self, value: Any) -> dict[str, JSONValue]:
        """`value`'s fields as JSON-ready data, each checked against its declared type."""
        try:
            data: dict[str, JSONValue] = msgspec.to_builtins(value, enc_hook=_encode_other)
        except (TypeError, ValueError) as exc:
            self._check(value)  # names the field, if one is the wrong type
            raise _Mismatch("", str(exc)) from None  # a value of no JSON form under `Any`
        except RecursionError:
            raise _too_deep() from None
        self._check(value)
        return data

    def fingerprint(self, value: Any) -> bytes | None:
        """`value`'s fields as MessagePack: equal bytes, equal payload (None if it has none).

        MessagePack keeps what JSON would blur (a NaN is not a null, 2.0 is
        not 2), so fields whose fingerprint has not changed since they passed
        the check would pass it again, with the same payload. (One thing it
        blurs is an aware datetime's offset: the same instant in another zone
        gives the same bytes, and keeps the offset it was checked with.)
        """
        try:
            return _FINGERPRINT.encode(value)
        except (TypeError, ValueError, RecursionError):
            return None  # `dump` says what is wrong

    def _check(self, value: Any) -> None:
        try:
            msgspec.convert(
                value,
                self._shape,
                from_attributes=True,
                builtin_types=NATIVE,
                dec_hook=_decode_other,
            )
        except msgspec.ValidationError as exc:
            fields = {name: getattr(value, name) for name in self._fields if hasattr(value, name)}
            raise self._problems(fields, exc, shape=True) from None
        except RecursionError:
            raise _too_deep() from None

    def load(self, data: JSONValue) -> Any:
        """Build the job class from stored JSON data, refusing unknown and missing fields.

        The class itself is built by its own `__init__`, so its `__post_init__`
        runs and what that raises reaches the caller as it was raised.
        """
        if type(data) is not dict:
            raise _Mismatch("", f"expected an object of fields, got {_json_kind(data)}")
        if not self._names.issuperset(data):
            unknown = data.keys() - self._names
            raise _Mismatch("", "unknown field(s) " + ", ".join(f"`{k}`" for k in sorted(unknown)))
        try:
            read = msgspec.convert(data, self._reading, dec_hook=_decode_other)
        except msgspec.ValidationError as exc:
            read = self._read_slowly(data, exc)
        kwargs = msgspec.structs.asdict(read)  # in C: this runs for every job a worker starts
        if self._optional:
            unset = msgspec.UNSET
            kwargs = {k: v for k, v in kwargs.items() if v is not unset}
        return self._cls(**kwargs)

    def _read_slowly(self, data: dict[str, Any], first: msgspec.ValidationError) -> Any:
        """`data` read after the fast conversion failed: with durations as people write them
        (`30s`), or refused with every problem listed."""
        fields = {name: self._fields[name][0] for name in data}
        written = {name: with_durations(value, fields[name]) for name, value in data.items()}
        if any(written[name] is not data[name] for name in data):
            try:
                return msgspec.convert(written, self._reading, dec_hook=_decode_other)
            except msgspec.ValidationError:
                pass
        raise self._problems(data, first, shape=False)

    def _problems(
        self, values: dict[str, Any], first: msgspec.ValidationError, *, shape: bool
    ) -> _Mismatch:
        """Every field of `values` that does not fit, and every required field missing.

        One problem reads as before (`at `qty`: expected ...`); several are
        listed in one message, in the order of the class's fields.
        """
        problems: list[tuple[str, str]] = []
        for name, (declared, shaped) in self._fields.items():
            if name not in values:
                if name in self._required and not shape:
                    problems.append((name, "missing required field"))
                continue
            tp = shaped if shape else declared
            value = values[name] if shape else with_durations(values[name], declared)
            try:
                if shape:
                    msgspec.convert(
                        value,
                        tp,
                        from_attributes=True,
                        builtin_types=NATIVE,
                        dec_hook=_decode_other,
                    )
                else:
                    msgspec.convert(value, tp, dec_hook=_decode_other)
            except msgspec.ValidationError as exc:
                found = _mismatch(exc)
                below = found.path
                path = name + ("" if not below or below.startswith("[") else ".") + below
                problems.append((path, _explained(found.message, type_at(declared, below))))
            except RecursionError:
                return _too_deep()
        if not problems:
            return _mismatch(first)  # not about one field: msgspec's own words
        if len(problems) == 1:
            return _Mismatch(*problems[0])
        listed = "; ".join(f"`{path}`: {message}" for path, message in problems)
        return _Mismatch("", f"{len(problems)} problems: {listed}")


def _explained(message: str, tp: Any) -> str:
    """`message` with what the type allows: an Enum's or Literal's values, duration forms."""
    allowed = choices(tp) if tp is not None else None
    if allowed is not None:
        return f"{message.replace('Invalid', 'invalid', 1)}; allowed: {allowed}"
    if tp is timedelta and "duration" in message.lower():
        said = message.replace("Invalid ISO8601 duration", "not a duration")
        return f"{said}; write {DURATION_FORMS}"
    return message


def _too_deep() -> _Mismatch:
    # 256 is `entry_fields.MAX_DEPTH`, the deepest a worker reads (a module beside this one).
    return _Mismatch(
        "",
        "the payload is nested too deeply to encode; workers read at most 256 levels, "
        "so flatten it or store it elsewhere and pass its key",
    )


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def mismatch_error(prefix: str, exc: _Mismatch) -> PayloadError:
    """Turn an internal mismatch into a `PayloadError` that points at the field."""
    where = f" at `{exc.path}`" if exc.path else ""
    return PayloadError(f"{prefix}{where}: {exc.message}")


_AT = re.compile(r"^(?P<message>.*?)(?: - at `\$\.?(?P<path>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_NOT_FINITE = re.compile(r"^Expected `float` [<>]=")


def _mismatch(exc: msgspec.ValidationError) -> _Mismatch:
    """msgspec's "Expected `int`, got `str` - at `$.lines[0].qty`" as a path and a message."""
    found = _AT.match(str(exc))
    assert found is not None  # the pattern matches any text
    message, path = found["message"], found["path"] or ""
    missing = _MISSING.match(message)
    if missing:
        path = f"{path}.{missing['name']}" if path else missing["name"]
        message = "missing required field"
    elif _NOT_FINITE.match(message):
        message = "NaN and infinity have no JSON form"
    else:
        message = message.replace("Expected", "expected", 1)
    return _Mismatch(path.replace("[...]", "[]"), message)


def _require_decodable(tp: Any, where: str) -> None:
    """Refuse, at definition, a type msgspec could not read back (an ambiguous union)."""
    try:
        msgspec.json.Decoder(tp, dec_hook=_decode_other)
    except TypeError as exc:
        raise TypeError(
            f"{where}: this type cannot travel as JSON: {exc}. A JSON value cannot say which "
            "of two text-like (or two object-like, or two array-like) alternatives it was; "
            "give each its own field, or use one type"
        ) from None


def _json_kind(data: JSONValue) -> str:
    if data is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(data), "a number"
    )
