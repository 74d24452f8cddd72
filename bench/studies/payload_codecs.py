# SPDX-License-Identifier: MIT
"""Which library should check and encode job fields: measured, not guessed.

Every dispatch builds a job, checks its fields against their types and
encodes them as JSON, so that work's cost is paid per job by every caller.
This times the three ways of doing it on the same realistic shape (the
`SendInvoice` job of `bench.studies.dispatch_cost`) for `--jobs` jobs:

- **library**: what rainier-queue does now (`SendInvoice(...)` checks the
  fields; `build_envelope` and `encode_payload` produce the stored text);
- **msgspec**: a plain dataclass, `msgspec.to_builtins`, `msgspec.convert`
  into a mirror of the type (the check), the text from `json`;
- **pydantic**: `TypeAdapter(dataclass).validate_python(fields)` (build and
  check in one), then `dump_json`.

Rounds interleave the candidates; medians are printed. A candidate whose
library is not installed is skipped.

    .venv/bin/python -m bench.studies.payload_codecs --jobs 100000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from rainier_queue.envelope import encode_payload
from rainier_queue.packing import build_envelope

from .dispatch_cost import Line, Priority, SendInvoice


@dataclass(kw_only=True)
class PlainInvoice:
    invoice_id: UUID
    customer_id: int
    email: str
    total: Decimal
    due: date
    issued_at: datetime
    lines: list[Line]
    tags: list[str]
    note: str | None = None
    priority: Priority = Priority.NORMAL


def fields(count: int) -> list[dict[str, Any]]:
    issued = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)
    return [
        {
            "invoice_id": UUID(int=n),
            "customer_id": n % 977,
            "email": f"customer{n}@example.com",
            "total": Decimal("59.97"),
            "due": date(2027, 1, 2),
            "issued_at": issued,
            "lines": [Line(sku=f"SKU-{n % 50}", quantity=3, price=Decimal("19.99"))],
            "tags": ["monthly", "eu"],
            "note": None if n % 2 else "thanks",
        }
        for n in range(count)
    ]


def library(batch: list[dict[str, Any]]) -> None:
    for kwargs in batch:
        encode_payload(build_envelope(SendInvoice(**kwargs)).payload)


def msgspec_candidate() -> Callable[[list[dict[str, Any]]], None] | None:
    try:
        import msgspec
    except ImportError:
        return None
    # Annotations are strings under `from __future__ import annotations`; resolve them.
    hints = typing.get_type_hints(PlainInvoice)
    mirror = msgspec.defstruct("Mirror", list(hints.items()), kw_only=True)
    compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def run(batch: list[dict[str, Any]]) -> None:
        for kwargs in batch:
            data = msgspec.to_builtins(PlainInvoice(**kwargs))
            msgspec.convert(data, mirror)
            compact.encode(data)

    return run


def pydantic_candidate() -> Callable[[list[dict[str, Any]]], None] | None:
    try:
        from pydantic import TypeAdapter
    except ImportError:
        return None
    adapter = TypeAdapter(PlainInvoice)

    def run(batch: list[dict[str, Any]]) -> None:
        for kwargs in batch:
            adapter.dump_json(adapter.validate_python(kwargs))

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.studies.payload_codecs", description=__doc__
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    batch = fields(args.jobs)
    candidates = {
        "library": library,
        "msgspec": msgspec_candidate(),
        "pydantic": pydantic_candidate(),
    }
    times: dict[str, list[float]] = {name: [] for name, run in candidates.items() if run}
    for n in range(args.rounds):
        order = list(times)
        for name in order if n % 2 == 0 else order[::-1]:
            run = candidates[name]
            assert run is not None
            started = time.perf_counter()
            run(batch)
            times[name].append(time.perf_counter() - started)
    print(f"build + check + encode, {args.jobs:,} jobs, medians of {args.rounds} rounds")
    for name, taken in times.items():
        median = statistics.median(taken)
        print(f"  {name:<9} {median:7.3f} s  {median / args.jobs * 1e6:6.2f} µs/job")
    for name in ("msgspec", "pydantic"):
        if name not in times:
            print(f"  {name:<9} skipped: not installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
