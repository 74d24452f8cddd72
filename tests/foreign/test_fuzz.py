# SPDX-License-Identifier: MIT
"""Fuzzing the read path: noise and near-valid envelopes, as functions and through real storage.

The pure tests push many examples through the functions every driver reads
with; the storage tests write a few batches into a real SQLite file and a
real Redis stream, through those backends' `plant` hooks (the contract
suite's foreign writers, tests/contract/backends.py), and let a real worker
drain them. Either way the property
is the same: every entry becomes a job or a failed record, nothing raises,
and what is listed can be printed. `RAINIER_QUEUE_FUZZ=long` (`make fuzz`)
runs far more examples.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import uuid
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rainier_queue.entry_fields import parse_json, raw_value
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import MalformedEntry
from rainier_queue.queue import Queue
from rainier_queue.stored import COLUMNS as ENVELOPE_COLUMNS
from rainier_queue.stored import Malformed, read_columns, read_envelope

from ..contract.backends import BACKENDS
from ..worker.jobs import Journal, quick, worker_for
from .catalog import QUEUE, sql_row
from .strategies import (
    FUZZ_EXAMPLES,
    STORAGE_EXAMPLES,
    column_values,
    near_envelopes,
    stored_bodies,
)

COLUMNS: tuple[str, ...] = ("payload", "headers", "attempts", "max_attempts", "available_at")
COLUMNS += ("created_at", "unique_key", "name", "id")


pure = settings(max_examples=FUZZ_EXAMPLES, deadline=None)
through_storage = settings(
    max_examples=STORAGE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _printable(data: object) -> None:
    """`data` can be written as JSON and as UTF-8: what a failed store and the CLI need."""
    json.dumps(data, ensure_ascii=False).encode("utf-8")


def _check_read(result: QueuedJob | Malformed) -> None:
    if isinstance(result, Malformed):
        assert result.reason
        _printable(result.as_job(queue=QUEUE, job_id="x").to_dict())
        _printable(result.error)
        return
    text = result.to_json()
    text.encode("utf-8")
    assert read_envelope(text) == result, "a job read back from its own JSON is the same job"


@pure
@given(stored_bodies | near_envelopes("fuzz-1"))
def test_any_stored_body_reads_as_a_job_or_as_a_malformed_record_that_prints(
    body: str | bytes,
) -> None:
    _check_read(read_envelope(body))


@pure
@given(
    st.dictionaries(st.sampled_from(COLUMNS), column_values, max_size=3),
)
def test_any_columns_read_as_a_job_or_as_a_malformed_record_that_prints(
    changes: dict[str, object],
) -> None:
    row = sql_row("fuzz-1", "")
    row.update(changes)
    columns = [row[name] for name in ENVELOPE_COLUMNS]
    _check_read(read_columns(columns))


@pure
@given(st.text() | st.sampled_from(["[" * 20_000 + "]" * 20_000, '"\\ud800"', "NaN"]))
def test_a_cli_payload_is_json_or_a_malformed_entry_naming_the_option(text: str) -> None:
    outcome: object
    try:
        outcome = parse_json(text, "--payload")
    except MalformedEntry as exc:
        outcome = exc
    if isinstance(outcome, MalformedEntry):
        assert outcome.field == "--payload"
    else:
        _printable(outcome)


def _drain(queue: Queue) -> tuple[Counter[str], int, int]:
    """Run a worker over `queue` until it is empty: (texts run, failed records, left waiting)."""

    async def go() -> tuple[Counter[str], int, int]:
        journal = Journal()
        try:
            options = quick(stop_when_empty=True, queues=(QUEUE,), concurrency=4)
            await worker_for(queue, journal, options).run()
            failed = await queue.failed_jobs(limit=10_000)  # type: ignore[attr-defined]
            for record in failed:
                _printable(record.job.to_dict())
                _printable(record.error)
            return Counter(journal.ran), len(failed), await queue.size(QUEUE)
        finally:
            await queue.aclose()

    return asyncio.run(go())


def _planted(backend: str, entries: list[tuple[str, object]]) -> tuple[Counter[str], int, int, int]:
    """Write `entries` through a backend's `plant` hook, one at a time, and drain them with a
    worker: (texts run, failed records, left waiting, entries the storage took)."""
    chosen = BACKENDS[backend]
    assert chosen.plant is not None
    if chosen.check is not None:
        chosen.check()
    plant = chosen.plant
    namespace = "rqz" + uuid.uuid4().hex[:10]

    async def write(tmp: Path) -> int:
        queue = chosen.open(tmp, namespace)
        try:
            await queue.size(QUEUE)  # creates the tables
        finally:
            await queue.aclose()
        stored = 0
        for entry in entries:
            try:
                await plant.write(tmp, namespace, QUEUE, [entry])
            except (sqlite3.IntegrityError, OverflowError, sqlite3.ProgrammingError):
                continue  # refused on insert: the writer hears of it, not us
            stored += 1
        return stored

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        try:
            stored = asyncio.run(write(tmp))
            ran, failed, waiting = _drain(chosen.open(tmp, namespace))
        finally:
            if chosen.cleanup is not None:
                asyncio.run(chosen.cleanup(tmp, namespace))
    return ran, failed, waiting, stored


@through_storage
@given(
    st.lists(
        st.dictionaries(st.sampled_from(COLUMNS[:-1]), column_values, max_size=3),
        min_size=1,
        max_size=10,
    )
)
def test_fuzzed_rows_in_a_sqlite_file_never_stop_a_worker(changes: list[dict[str, object]]) -> None:
    rows: list[tuple[str, object]] = [
        (f"fuzz-{i}", {**sql_row(f"fuzz-{i}", ""), **change}) for i, change in enumerate(changes)
    ]
    ran, failed, waiting, stored = _planted("sqlite", rows)
    assert all(count == 1 for count in ran.values()), "no job runs twice"
    assert sum(ran.values()) + failed + waiting == stored, "every row ran, failed or waits"


@through_storage
@given(st.data(), st.integers(min_value=1, max_value=10))
def test_fuzzed_stream_entries_in_redis_never_stop_a_worker(
    data: st.DataObject, count: int
) -> None:
    bodies: list[tuple[str, object]] = [
        (f"fuzz-{i}", data.draw(near_envelopes(f"fuzz-{i}") | stored_bodies)) for i in range(count)
    ]
    ran, failed, waiting, stored = _planted("redis", bodies)
    assert all(count == 1 for count in ran.values()), "no job runs twice"
    assert sum(ran.values()) + failed + waiting == stored == count, (
        "every entry ran, failed or waits"
    )


@pure
@given(st.text() | st.binary() | st.sampled_from(["\ud800", "a\udfffb", "\udc80"]))
def test_any_text_or_bytes_become_raw_data_that_prints(value: str | bytes) -> None:
    _printable(raw_value(value))
