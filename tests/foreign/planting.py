# SPDX-License-Identifier: MIT
"""The `plant` hooks' two shapes: rows in a jobs table, and envelope bodies in a stream or log.

Each backend of the contract suite writes entries its own way (a database
client, `XADD`, a plain Kafka producer); what it writes comes from here and
from the catalog, so every driver that stores rows is held to the same rows,
and every driver that stores envelope bodies to the same bodies, plus what
only its storage can hold (SQLite's loose typing, a Kafka record without a
value).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rainier_queue.entry_fields import raw_value

from .catalog import GOOD_VARIANTS, SQL_BAD_ROWS, bad_bodies, envelope, sql_row

if TYPE_CHECKING:
    # Imported when called: the backends import this module while backends.py finds them.
    from ..contract.backends import Plant, Planted

Write = Callable[[Path, str, str, Sequence[tuple[str, Any]]], Coroutine[Any, Any, None]]
Insert = Callable[[Path, str, list[dict[str, object]]], None]
"""Writes rows into a namespace's jobs table (tmp, namespace, rows), as a foreign program."""


def _good_names(count: int) -> list[str]:
    return [f"good-{n:02d}" for n in range(count)]


def sql_rows(
    insert: Insert,
    *,
    bad: Mapping[str, tuple[dict[str, object], str]] | None = None,
    lenient: Sequence[dict[str, object]] = (),
) -> Plant:
    """Rows in the documented columns: the catalog's malformed rows and `bad` (what only
    this database lets in), and good rows, the first in GOOD_VARIANTS' shapes and `lenient`'s."""
    from ..contract.backends import Plant

    async def write(tmp: Path, namespace: str, queue: str, entries: Sequence[Planted]) -> None:
        insert(tmp, namespace, [{**row, "queue": queue} for _, row in entries])

    def good(ledger: str, count: int) -> list[Planted]:
        shapes = [*GOOD_VARIANTS.values(), *lenient]
        return [
            (name, sql_row(name, ledger, **(shapes[n] if n < len(shapes) else {})))
            for n, name in enumerate(_good_names(count))
        ]

    rows = {
        f"bad-{name}": (sql_row(f"bad-{name}", "", **changes), says)
        for name, (changes, says) in {**SQL_BAD_ROWS, **(bad or {})}.items()
    }

    def listed(record: Mapping[str, Any]) -> str | None:
        return str(record["id"])  # a row keeps its own id

    return Plant(write=write, good=good, bad=rows, listed=listed)


def _as_listed(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def envelope_bodies(
    write: Write,
    *,
    bad: Mapping[str, tuple[Any, str]] | None = None,
    listed: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> Plant:
    """Envelope bodies in the documented JSON form, and the catalog's malformed ones and
    `bad`. A failed record is matched to its entry by the body it keeps, unless `listed`
    says otherwise (a Kafka record keeps its key)."""
    from ..contract.backends import Plant

    bodies: dict[str, tuple[Any, str]] = {**bad_bodies(""), **(bad or {})}
    kept = {_as_listed(raw_value(body)): name for name, (body, _) in bodies.items()}

    def good(ledger: str, count: int) -> list[Planted]:
        return [(name, json.dumps(envelope(name, name, ledger))) for name in _good_names(count)]

    def by_body(record: Mapping[str, Any]) -> str | None:
        return kept.get(_as_listed(record["payload"].get("raw")))

    return Plant(write=write, good=good, bad=bodies, listed=listed or by_body)
