# SPDX-License-Identifier: MIT
"""The field types users pass, their one JSON form (docs/payloads.md), the errors for the rest."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, TypedDict
from uuid import UUID

import pydantic
import pytest

from rainier_queue import Job, JobContext, PayloadError, QueueManager
from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob, encode_payload

ROOT = Path(__file__).resolve().parents[2]


class Size(enum.Enum):
    SMALL = 1
    LARGE = 2


class Point(TypedDict):
    x: int
    y: float


class Customer(pydantic.BaseModel):
    name: str
    since: datetime


@dataclass
class Line:
    sku: str
    quantity: int
    price: Decimal


class Everything(Job):
    name = "payload-everything"

    moment: datetime
    day: date
    clock: time
    wait: timedelta
    ident: UUID
    amount: Decimal
    size: Size
    raw: bytes
    lines: list[Line]
    pair: tuple[int, str]
    labels: set[str]
    frozen: frozenset[int]
    by_name: dict[str, list[int]]
    maybe: int | None
    either: int | str
    point: Point
    customer: Customer
    anything: Any = None

    async def handle(self, ctx: JobContext) -> None:
        pass


def everything() -> Everything:
    return Everything(
        moment=datetime(2026, 12, 3, 16, 5, 1, 250, tzinfo=UTC),
        day=date(2026, 12, 3),
        clock=time(16, 5, 1),
        wait=timedelta(days=1, seconds=3, microseconds=5),
        ident=UUID(int=7),
        amount=Decimal("19.90"),
        size=Size.LARGE,
        raw=b"\x00\xff",
        lines=[Line("A-1", 2, Decimal("9.95"))],
        pair=(1, "one"),
        labels={"x"},
        frozen=frozenset({3}),
        by_name={"a": [1, 2]},
        maybe=None,
        either="text",
        point={"x": 1, "y": 2.5},
        customer=Customer(name="Ada", since=datetime(2020, 1, 1, tzinfo=UTC)),
        anything={"free": ["form", 1]},
    )


def test_every_documented_type_has_its_one_json_form_and_comes_back_as_declared() -> None:
    original = everything()

    text = encode_payload(original.to_payload())

    assert json.loads(text) == {
        "moment": "2026-12-03T16:05:01.000250Z",
        "day": "2026-12-03",
        "clock": "16:05:01",
        "wait": "P1DT3.000005S",
        "ident": "00000000-0000-0000-0000-000000000007",
        "amount": "19.90",
        "size": 2,
        "raw": "AP8=",
        "lines": [{"sku": "A-1", "quantity": 2, "price": "9.95"}],
        "pair": [1, "one"],
        "labels": ["x"],
        "frozen": [3],
        "by_name": {"a": [1, 2]},
        "maybe": None,
        "either": "text",
        "point": {"x": 1, "y": 2.5},
        "customer": {"name": "Ada", "since": "2020-01-01T00:00:00Z"},
        "anything": {"free": ["form", 1]},
    }
    rebuilt = Everything.from_payload(json.loads(text))
    assert rebuilt == original
    assert type(rebuilt.customer) is Customer
    assert type(rebuilt.lines[0]) is Line


def test_a_payload_stored_by_the_old_code_is_read_back_as_declared() -> None:
    # Written the way the hand-written encoder before msgspec wrote it: offsets as
    # +00:00, floats always with a point, tuples and sets as arrays. An envelope
    # without `v` is version 1.
    stored = (
        '{"id":"0190d6c5-0000-7000-8000-000000000001","name":"old-shape","queue":"default",'
        '"attempts":0,"max_attempts":3,"available_at":"2026-12-02T13:00:00.000000Z",'
        '"created_at":"2026-12-02T13:00:00.000000Z","headers":{},"payload":{'
        '"when":"2026-12-02T13:00:00.123456+00:00","local":"2026-12-02T13:00:00",'
        '"offset":"2026-12-02T13:00:00+05:30","day":"2026-12-02",'
        '"ident":"00000000-0000-0000-0000-000000000005","amount":"1E+2","ratio":2.0,'
        '"size":1,"pair":[1,"a"],"tags":["t"],"line":{"sku":"S","quantity":1,"price":"0.5"}}}'
    )

    class OldShape(Job):
        name = "old-shape"
        when: datetime
        local: datetime
        offset: datetime
        day: date
        ident: UUID
        amount: Decimal
        ratio: float
        size: Size
        pair: tuple[int, str]
        tags: set[str]
        line: Line

    envelope = QueuedJob.from_json(stored)
    job = OldShape.from_payload(envelope.payload)

    assert job == OldShape(
        when=datetime(2026, 12, 2, 13, 0, 0, 123456, tzinfo=UTC),
        local=datetime(2026, 12, 2, 13, 0, 0),
        offset=datetime(2026, 12, 2, 13, 0, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        day=date(2026, 12, 2),
        ident=UUID(int=5),
        amount=Decimal("1E+2"),
        ratio=2.0,
        size=Size.SMALL,
        pair=(1, "a"),
        tags={"t"},
        line=Line("S", 1, Decimal("0.5")),
    )


@pytest.mark.parametrize(
    ("change", "where", "what"),
    [
        ({"lines": [Line("A", "2", Decimal(1))]}, "lines[0].quantity", "expected `int`"),  # type: ignore[arg-type]
        ({"point": {"x": 1, "y": float("nan")}}, "point.y", ""),
        ({"lines": [Line("A", 1, 3.5)]}, "lines[0].price", "expected `decimal`"),  # type: ignore[arg-type]
        ({"moment": "2026-12-03T16:05:01Z"}, "moment", "expected `datetime`, got `str`"),
        ({"customer": {"name": "Ada"}}, "customer", "since"),
        ({"wait": 3}, "wait", "expected `duration`"),
    ],
)
def test_a_value_that_does_not_fit_names_the_field_and_the_type(
    change: dict[str, object], where: str, what: str
) -> None:
    with pytest.raises(PayloadError, match=re.escape(f"at `{where}`: ") + ".*" + re.escape(what)):
        dataclasses.replace(everything(), **change)  # type: ignore[arg-type]


@dataclass
class Reading:
    value: float


def test_nan_in_a_nested_float_is_refused_as_having_no_json_form() -> None:
    class Measure(Job):
        name = "measure"
        readings: list[Reading]

    with pytest.raises(PayloadError, match=r"at `readings\[1\].value`: NaN and infinity"):
        Measure(readings=[Reading(1.0), Reading(float("inf"))])


async def test_a_job_changed_after_it_was_built_is_checked_again_at_dispatch() -> None:
    manager = QueueManager(open_queue("memory://"))
    job = everything()
    await manager.dispatch(job)  # checked when built, unchanged: goes

    job.lines[0].quantity = "two"  # type: ignore[assignment]
    with pytest.raises(PayloadError, match=re.escape("`lines[0].quantity`")):
        await manager.dispatch(job)
    job.lines[0].quantity = 2
    job.point["y"] = float("nan")
    with pytest.raises(PayloadError, match=re.escape("`point.y`")):
        await manager.dispatch_many([everything(), job])
    assert await manager.queue.size("default") == 1


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ("type", "cannot travel as JSON; use str, int"),
        ("dict[int, str]", "dict[str, ...]"),
        ("str | UUID", "more than one str-like type.*give each its own field"),
        ("list[complex]", "`?Bad.values\\[\\]`?: a field of type <class 'complex'>"),
    ],
)
def test_a_field_type_that_cannot_travel_is_refused_at_definition_saying_what_to_do(
    annotation: str, message: str
) -> None:
    namespace: dict[str, Any] = {"name": "bad", "__annotations__": {"values": annotation}}
    namespace["__module__"] = __name__
    with pytest.raises(TypeError, match=message):
        type("Bad", (Job,), namespace)


def test_a_stored_payload_of_the_wrong_type_names_the_nested_field() -> None:
    payload = everything().to_payload()
    payload["lines"][0]["quantity"] = "x"
    with pytest.raises(PayloadError, match=re.escape("diverged") + ".*`lines\\[0\\].quantity`"):
        Everything.from_payload(payload)


def test_jobs_without_pydantic_models_never_import_pydantic() -> None:
    program = (
        "import sys\n"
        "from rainier_queue import Job\n"
        "class Plain(Job):\n"
        "    name = 'plain'\n"
        "    n: int\n"
        "assert Plain.from_payload(Plain(n=1).to_payload()) == Plain(n=1)\n"
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, cwd=ROOT)


def test_no_module_of_the_library_uses_cpythons_private_json_encoder() -> None:
    sources = (ROOT / "src" / "rainier_queue").rglob("*.py")
    users = [p.name for p in sources if "c_make_encoder" in p.read_text(encoding="utf-8")]
    assert users == []


class Free(Job):
    name = "payload-free"
    data: Any

    async def handle(self, ctx: JobContext) -> None:
        pass


def _nested(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (_nested(300), "nested more than 256 levels"),
        (_nested(5000), "nested too deeply to encode"),
        ("\ud800", "lone surrogate"),
        ({"a": float("nan")}, "not JSON-serialisable"),
    ],
    ids=["300-deep", "5000-deep", "surrogate", "nan-under-any"],
)
async def test_what_a_worker_could_not_read_is_refused_at_dispatch_and_nothing_stored(
    tmp_path: Path, value: object, message: str
) -> None:
    manager = QueueManager(open_queue(f"sqlite:///{tmp_path / 'jobs.db'}"))
    try:
        with pytest.raises(PayloadError, match=message):
            await manager.dispatch_many([Free(data=1), Free(data=value)])
        assert await manager.queue.size("default") == 0
    finally:
        await manager.aclose()
