# SPDX-License-Identifier: MIT
"""The checks every stored field passes before it is believed, each naming the field it refuses.

A job read from storage may have been written by anything (see `stored`),
so nothing read is trusted as a number, a time or text until one of these
has looked at it. Each raises `MalformedEntry` with the field's name and
what was wrong; none recurses, so a hostile entry cannot exhaust the stack:
limits are checked from the text before it is parsed.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

import msgspec

from .._clock import from_micros
from ..errors import MalformedEntry, PayloadError

WIRE_VERSION = 1
"""The envelope version this code writes and reads (see `envelope`)."""

MAX_DEPTH = 256
"""Deepest nesting of arrays and objects a payload may have, at dispatch and on reading."""

MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""Largest stored text this library reads as a job (64 MiB)."""

MAX_COUNT = 2**31 - 1
"""Largest `attempts` / `max_attempts` a job may carry (the SQL column is a 32-bit integer)."""

EARLIEST_MICROS = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
LATEST_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

# -- text and JSON -------------------------------------------------------------------


def raw_value(value: object) -> object:
    """`value` as JSON-safe data: bytes that are not UTF-8, and lone surrogates, in base64."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, memoryview | bytearray):
        value = bytes(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    text = value if isinstance(value, str) else repr(value)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Surrogates from `surrogateescape` stand for bytes that were not UTF-8: give
        # those back. Any other lone surrogate (a JSON `\ud800` escape) is kept as
        # the bytes Python would write for it, so the record still says what it held.
        try:
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = text.encode("utf-8", "surrogatepass")
        return {"base64": base64.b64encode(data).decode("ascii")}
    return text


def as_text(value: object, field: str) -> str:
    """`value` as valid UTF-8 text, or `MalformedEntry` naming `field`."""
    if isinstance(value, memoryview | bytearray):
        value = bytes(value)
    if isinstance(value, bytes):
        if len(value) > MAX_ENTRY_BYTES:
            raise MalformedEntry(field, f"is {len(value):,} bytes, over the limit of 64 MiB")
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedEntry(field, f"is not valid UTF-8 (byte {exc.start})") from None
    if not isinstance(value, str):
        raise MalformedEntry(field, f"must be text, not {_kind(value)}")
    if len(value) > MAX_ENTRY_BYTES:
        raise MalformedEntry(field, f"is {len(value):,} characters, over the limit of 64 MiB")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedEntry(field, f"is not valid UTF-8 (character {exc.start})") from None
    return value


def check_depth(text: str, field: str = "payload") -> None:
    """Refuse JSON text nested deeper than `MAX_DEPTH`, without parsing it.

    Counting brackets is a bound on the depth and costs next to nothing, so
    the exact measure (which ignores brackets inside strings) runs only for
    text with many of them. Text whose brackets do not balance is left to
    the JSON parser, which refuses it (as too deep, if it is).
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    # Strings out first (their brackets do not nest), then the innermost brackets
    # away, pass after pass, each pass one level: both are regular expressions,
    # so even a large payload with many brackets costs a few passes in C.
    structure = _STRINGS.sub("", text)
    for _ in range(MAX_DEPTH):
        if "[" not in structure and "{" not in structure:
            return
        shallower = _INNERMOST.sub("", structure)
        if shallower == structure:
            return  # unbalanced: the JSON parser says what is wrong with it
        structure = shallower
    if "[" in structure or "{" in structure:
        raise MalformedEntry(field, f"is nested more than {MAX_DEPTH} levels deep")


_STRINGS = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_INNERMOST = re.compile(r"\[[^\[\]{}]*+\]|\{[^\[\]{}]*+\}")


def parse_json(value: object, field: str) -> object:
    """Stored JSON text as data, with every limit checked first; `MalformedEntry` otherwise."""
    text = as_text(value, field)
    check_depth(text, field)
    try:
        data = FAST_JSON.decode(text)
    except (msgspec.MsgspecError, RecursionError):
        data = _read_strictly(text, field)
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedEntry(
                field, "holds a lone surrogate escape (such as \\ud800), which is not text"
            ) from None
    return data


def _read_strictly(text: str, field: str) -> object:
    """`text` read by `STRICT_JSON`, whose refusals say what is wrong (`parse_json`)."""
    try:
        return STRICT_JSON.decode(text)
    except RecursionError:  # unbalanced text too deep for the parser (check_depth passed it on)
        raise MalformedEntry(field, f"is nested more than {MAX_DEPTH} levels deep") from None
    except _BeyondFloat as exc:
        where = _where_beyond(text)
        raise MalformedEntry(
            field,
            f"holds the number {exc.number}{where}, beyond what a float holds: it would be read "
            "as infinity, which dispatch refuses to write (JSON has no infinity)",
        ) from None
    except ValueError as exc:
        raise MalformedEntry(field, f"is not JSON ({exc})") from None


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


class _BeyondFloat(ValueError):
    """A JSON number too large for a float (`1e999`), which Python would read as infinity."""

    def __init__(self, number: str) -> None:
        super().__init__(f"{number} is beyond what a float holds")
        self.number = number if len(number) <= 40 else number[:37] + "..."


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent, refused if it overflows to infinity.

    Called by the decoder for such numbers only (integers and payloads with
    no fractions never come here), so it costs a call per float.
    """
    value = float(text)
    if value - value != 0.0:  # inf - inf is nan; every finite float gives 0
        raise _BeyondFloat(text)
    return value


FAST_JSON = msgspec.json.Decoder()
"""Reads every envelope first, in C, at a third of `STRICT_JSON`'s cost. What it reads, it
reads as `STRICT_JSON` does (the same values, the last of repeated keys); what it refuses
(`NaN`, `Infinity`, `1e999`, a lone surrogate escape, anything malformed) goes to
`STRICT_JSON`, so every refusal and its message stay as they were."""

STRICT_JSON = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite_float)
"""JSON as RFC 8259 has it, read as dispatch writes it: `NaN` and `Infinity` (which Python
would read) are refused, and so is a number too large for a float (`1e999`), which Python
would read as infinity."""


class _Beyond:
    """Marks, in a second reading on the error path, where the number too large was."""


def _where_beyond(text: str) -> str:
    """` at `price`` (the path of the first number too large in `text`), or nothing."""

    def mark(number: str) -> object:
        value = float(number)
        return _Beyond() if value - value != 0.0 else value

    try:
        data = json.JSONDecoder(parse_constant=_no_constants, parse_float=mark).decode(text)
    except (ValueError, RecursionError):
        return ""
    path = _path_to_beyond(data, "")
    return f" at `{path}`" if path else ""


def _path_to_beyond(data: object, path: str) -> str | None:
    if isinstance(data, _Beyond):
        return path
    items: list[tuple[str, object]] = []
    if isinstance(data, dict):
        items = [(f"{path}.{key}" if path else str(key), value) for key, value in data.items()]
    elif isinstance(data, list):
        items = [(f"{path}[{index}]", value) for index, value in enumerate(data)]
    for where, value in items:
        found = _path_to_beyond(value, where)
        if found is not None:
            return found
    return None


# -- fields ----------------------------------------------------------------------------


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the text {shown!r}"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{len(value)} bytes"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def name_field(value: object, field: str) -> str:
    """A required, non-empty text field (`id`, `name`, `queue`)."""
    text = as_text(value, field)
    if not text:
        raise MalformedEntry(field, "is empty")
    return text


def count_field(value: object, field: str, *, least: int) -> int:
    """A whole number from `least` to `MAX_COUNT` (`attempts`, `max_attempts`)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedEntry(field, f"must be a whole number, not {_kind(value)}")
    if not least <= value <= MAX_COUNT:
        raise MalformedEntry(field, f"must be from {least} to {MAX_COUNT}, not {value}")
    return value


def micros_field(value: object, field: str) -> datetime:
    """A time stored as microseconds since the epoch, within years 1 to 9999."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedEntry(
            field, f"must be microseconds since 1970 as a whole number, not {_kind(value)}"
        )
    if not EARLIEST_MICROS <= value <= LATEST_MICROS:
        raise MalformedEntry(field, f"is {value} microseconds, outside the years 1 to 9999")
    return from_micros(value)


def time_field(value: object, field: str) -> datetime:
    """An RFC 3339 time (naive is UTC), within years 1 to 9999."""
    if not isinstance(value, str):
        raise MalformedEntry(field, f"must be an RFC 3339 time as text, not {_kind(value)}")
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is UTC:  # what `format_time` writes, so nearly always
            return moment
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise MalformedEntry(
            field, f"is not an RFC 3339 time such as 2026-12-03T10:00:00Z ({_kind(value)}: {exc})"
        ) from None


def headers_field(value: object) -> dict[str, str]:
    """An object of text to text; numbers and booleans are taken as their text."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedEntry("headers", f"must be an object of text to text, not {_kind(value)}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, str):
            out[str(key)] = item
        elif isinstance(item, bool):
            out[str(key)] = "true" if item else "false"
        elif isinstance(item, int | float):
            out[str(key)] = json.dumps(item)
        else:
            raise MalformedEntry(f"headers.{key}", f"must be text, not {_kind(item)}")
    return out


def optional_text(value: object, field: str) -> str | None:
    """A text field that may be absent (`unique_key`)."""
    return None if value is None else as_text(value, field)


def version_field(value: object) -> int:
    """The envelope version: one this code reads, or an error that says which side is old."""
    if value is None:
        return WIRE_VERSION
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedEntry("v", f"must be a whole number, not {_kind(value)}")
    if value > WIRE_VERSION:
        raise MalformedEntry(
            "v",
            f"is {value}: the entry was written by a newer rainier-queue (this one reads "
            f"version {WIRE_VERSION}); upgrade this worker, then retry it",
        )
    if value < 1:
        raise MalformedEntry("v", f"must be 1 or more, not {value}")
    return value


def check_payload_text(text: str) -> None:
    """At dispatch: refuse a payload that a worker could not read back (too deep, too big)."""
    try:
        check_depth(text)
    except MalformedEntry as exc:
        raise PayloadError(f"the payload {exc.problem}, which workers refuse to read") from None
    if len(text) > MAX_ENTRY_BYTES:
        raise PayloadError(
            f"the payload is {len(text):,} characters of JSON, over the 64 MiB limit; "
            "store large data elsewhere and pass its key"
        )
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PayloadError(
                f"the payload holds {text[exc.start]!r}, a lone surrogate, which is not text "
                "and cannot be stored; decode bytes before putting them in a job"
            ) from None
