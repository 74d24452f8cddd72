# SPDX-License-Identifier: MIT
"""Entries other software might leave in our storage, good and bad, and what each must become.

Each malformed entry carries the field its failed record's error must name,
so a test can check that the error says *what* was wrong, not only that
something was. The well-formed ones follow the documented formats (the
envelope's JSON form, and the SQL table's columns) as a foreign producer
reading those documents would write them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime

QUEUE = "foreign"
DEEP = "[" * 10_000 + "]" * 10_000


@dataclass(frozen=True)
class BadEntry:
    """One malformed entry: its id (where it has one), what is wrong, the field to be named."""

    id: str
    names: str
    """Text the failed record's error must contain (the field, mostly)."""


def now_micros() -> int:
    return time.time_ns() // 1_000


def envelope(job_id: str, text: str, ledger: str, **changes: object) -> dict[str, object]:
    """A well-formed envelope of a `note` job, in its documented JSON form.

    `ledger` is the file the CLI's sample job appends its text to; with none,
    the payload fits the worker tests' `note` job (`text` only).
    """
    stamp = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    data: dict[str, object] = {
        "v": 1,
        "id": job_id,
        "name": "note",
        "payload": {"text": text, "path": ledger} if ledger else {"text": text},
        "queue": QUEUE,
        "attempts": 0,
        "max_attempts": 3,
        "available_at": stamp,
        "created_at": stamp,
        "headers": {},
    }
    data.update(changes)
    return data


# -- SQL rows: (column overrides, what must be named) ------------------------------------

SQL_BAD_ROWS: dict[str, tuple[dict[str, object], str]] = {
    "payload-empty": ({"payload": ""}, "`payload` is not JSON"),
    "payload-truncated": ({"payload": '{"text": "cut'}, "`payload` is not JSON"),
    "payload-bom": ({"payload": '\ufeff{"text": "bom"}'}, "`payload` is not JSON"),
    "payload-dict-repr": ({"payload": "{'text': 'x'}"}, "`payload` is not JSON"),
    "payload-deep": ({"payload": DEEP}, "`payload` is nested more than"),
    "payload-surrogate": ({"payload": '{"text": "\\ud800"}'}, "`payload` holds a lone surrogate"),
    "payload-beyond-float": (
        {"payload": '{"text": "x", "ratio": 1e999}'},
        "`payload` holds the number 1e999 at `ratio`",
    ),
    "headers-array": ({"headers": "[]"}, "`headers` must be an object"),
    "headers-not-json": ({"headers": "trace=1"}, "`headers` is not JSON"),
    "created-far-future": ({"created_at": 2**62}, "`created_at` is"),
    "created-far-past": ({"created_at": -(2**62)}, "`created_at` is"),
    "attempts-negative": ({"attempts": -3}, "`attempts` must be from 0"),
    "max-attempts-zero": ({"max_attempts": 0}, "`max_attempts` must be from 1"),
}
"""Malformed rows any of the three databases can hold."""

NUL_BAD_ROWS: dict[str, tuple[dict[str, object], str]] = {
    "payload-nul": ({"payload": '{"text": "x"}\x00'}, "`payload` is not JSON"),
}
"""Text with a NUL, which PostgreSQL refuses on insert and the others keep."""

SQLITE_BAD_ROWS: dict[str, tuple[dict[str, object], str]] = {
    "attempts-text": ({"attempts": "abc"}, "`attempts` must be a whole number"),
    "created-text": ({"created_at": "yesterday"}, "`created_at` must be microseconds"),
    "max-attempts-real": ({"max_attempts": 2.5}, "`max_attempts` must be a whole number"),
    "payload-not-utf8": ({"payload": ("not-utf8", b'{"text": "\xff\xfe"}')}, "not valid UTF-8"),
    "name-not-utf8": ({"name": ("not-utf8", b"n\xffte")}, "`name` is not valid UTF-8"),
}
"""Malformed rows only SQLite's loose typing lets in (the others refuse them on insert)."""


SQLITE_GOOD_VARIANTS: dict[str, dict[str, object]] = {
    "due-text": {"due_at": "tomorrow"},
    "due-blob": {"due_at": b"\x00\x01"},
    "lease-text": {"lease_until": "never", "reservation_token": "foreign", "reserved_at": 0},
}
"""Well-formed jobs whose times only SQLite's loose typing lets be text: no claim ever
found them due, and reading them stopped every idle worker; they must run like any other."""

GOOD_VARIANTS: dict[str, dict[str, object]] = {
    "headers-null": {"headers": "null"},
    "headers-numbers": {"headers": '{"try": 2, "sampled": true}'},
    "unique-key": {"unique_key": "orders:42"},
}
"""Rows a lenient reader takes as jobs: JSON `null` headers are none, numbers become text."""


def sql_row(job_id: str, ledger: str, **overrides: object) -> dict[str, object]:
    """A well-formed `jobs` row for a `note` job, as the table documents it (see `envelope`)."""
    now = now_micros()
    row: dict[str, object] = {
        "id": job_id,
        "queue": QUEUE,
        "name": "note",
        "payload": json.dumps({"text": job_id, "path": ledger} if ledger else {"text": job_id}),
        "headers": "{}",
        "attempts": 0,
        "max_attempts": 3,
        "available_at": now,
        "created_at": now,
        "unique_key": None,
        "due_at": now,
    }
    row.update(overrides)
    return row


# -- envelope bodies (Redis streams, Kafka records) --------------------------------------


def bad_bodies(ledger: str) -> dict[str, tuple[str | bytes, str]]:
    """Malformed envelope bodies, keyed by id, with what must be named."""

    def body(job_id: str, **changes: object) -> str:
        return json.dumps(envelope(job_id, job_id, ledger, **changes))

    return {
        "body-not-json": ("hello from another system", "is not JSON"),
        "body-array": ("[1, 2, 3]", "must be a JSON object"),
        "body-deep": (DEEP, "nested more than"),
        "body-not-utf8": (b'{"id": "x\xff", "name": "note"}', "not valid UTF-8"),
        "body-attempts-inf": (
            body("body-attempts-inf").replace('"attempts": 0', '"attempts": 1e999'),
            "`attempts`",
        ),
        "body-max-inf": (
            body("body-max-inf").replace('"max_attempts": 3', '"max_attempts": 1e999'),
            "`max_attempts`",
        ),
        "body-payload-beyond-float": (
            body("body-payload-beyond-float").replace(
                '"text": "body-payload-beyond-float"', '"text": "x", "ratio": -1.5e400'
            ),
            "holds the number -1.5e400 at `payload.ratio`",
        ),
        "body-created-word": (body("body-created-word", created_at="yesterday"), "`created_at`"),
        "body-month-13": (
            body("body-month-13", available_at="2026-13-01T00:00:00Z"),
            "`available_at`",
        ),
        "body-version-99": (body("body-version-99", v=99), "newer rainier-queue"),
        "body-version-text": (body("body-version-text", v="two"), "`v` must be a whole number"),
        "body-headers-array": (
            body("body-headers-array", headers=[1]),
            "`headers` must be an object",
        ),
        "body-no-name": (body("body-no-name", name=""), "`name` is empty"),
        "body-surrogate": (
            body("body-surrogate").replace('"text": "body-surrogate"', '"text": "\\ud800"'),
            "lone surrogate",
        ),
        "body-attempts-word": (
            body("body-attempts-word", attempts="abc"),
            "`attempts` must be a whole number",
        ),
    }
