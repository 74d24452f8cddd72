# SPDX-License-Identifier: MIT
"""Jobs are data with a stable name, checked when they are built."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal
from uuid import RFC_4122, UUID

import pytest

from rainier_queue import Job, JobContext, JobRegistry, PayloadError, UnknownJob, job
from rainier_queue._clock import from_micros, to_micros
from rainier_queue.backoff import job_backoff
from rainier_queue.envelope import (
    QueuedJob,
    decode_payload,
    encode_payload,
    format_time,
    new_job_id,
    parse_time,
)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Address:
    street: str
    number: int


class Everything(Job):
    name = "everything"

    text: str
    count: int
    ratio: float = 0.5
    flag: bool = False
    tags: list[str] | None = None
    scores: dict[str, int] | None = None
    colour: Colour = Colour.RED
    mode: Literal["fast", "slow"] = "fast"
    when: datetime | None = None
    ident: UUID | None = None
    address: Address | None = None

    async def handle(self, ctx: JobContext) -> None:
        pass


def test_a_job_round_trips_through_its_json_payload() -> None:
    original = Everything(
        text="hé ✉",
        count=3,
        ratio=2,
        tags=["a"],
        scores={"x": 1},
        colour=Colour.BLUE,
        mode="slow",
        when=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        ident=UUID(int=5),
        address=Address("Main", 9),
    )

    payload = original.to_payload()
    rebuilt = Everything.from_payload(payload)

    assert rebuilt == original
    assert payload["colour"] == "blue"
    assert payload["address"] == {"street": "Main", "number": 9}


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"text": 1, "count": 1}, "text"),
        ({"text": "a", "count": "1"}, "count"),
        ({"text": "a", "count": True}, "count"),
        ({"text": "a", "count": 1, "tags": ["a", 2]}, "tags[1]"),
        ({"text": "a", "count": 1, "mode": "medium"}, "mode"),
        ({"text": "a", "count": 1, "ratio": float("nan")}, "ratio"),
    ],
)
def test_a_bad_argument_fails_when_the_job_is_built_and_names_the_field(
    kwargs: dict[str, object], where: str
) -> None:
    with pytest.raises(PayloadError, match=re.escape(f"`{where}`")):
        Everything(**kwargs)  # type: ignore[arg-type]


def test_a_missing_argument_fails_at_the_call() -> None:
    with pytest.raises(TypeError, match="count"):
        Everything(text="a")  # type: ignore[call-arg]


def test_a_stored_payload_that_no_longer_fits_says_it_diverged() -> None:
    with pytest.raises(PayloadError, match="diverged.*unknown field"):
        Everything.from_payload({"text": "a", "count": 1, "removed_field": 2})
    with pytest.raises(PayloadError, match="diverged.*count.*missing"):
        Everything.from_payload({"text": "a"})
    with pytest.raises(PayloadError, match="diverged"):
        Everything.from_payload([1, 2])


def test_rebuilding_from_a_payload_leaves_later_constructions_checked() -> None:
    # from_payload skips the second check of fields it has just read; that
    # shortcut must end with the call, whether the payload fitted or not.
    with pytest.raises(PayloadError, match="diverged"):
        Everything.from_payload({"text": "a", "count": "one"})
    Everything.from_payload({"text": "a", "count": 1})
    with pytest.raises(PayloadError, match=re.escape("`count`")):
        Everything(text="a", count="one")  # type: ignore[arg-type]


def test_a_jobs_own_post_init_still_runs_when_it_is_rebuilt() -> None:
    class Positive(Job):
        name = "positive"
        amount: int

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.amount <= 0:
                raise ValueError("amount must be positive")

    assert Positive.from_payload({"amount": 3}) == Positive(amount=3)
    with pytest.raises(ValueError, match="positive"):
        Positive.from_payload({"amount": -1})


def test_a_job_without_a_name_is_refused_when_its_class_is_defined() -> None:
    with pytest.raises(TypeError, match="needs a `name`"):

        class Nameless(Job):
            async def handle(self, ctx: JobContext) -> None:
                pass


def test_a_field_type_that_cannot_travel_as_json_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="cannot travel as JSON"):

        class Bad(Job):
            name = "bad"
            conn: object.__class__  # type: ignore[valid-type]


def test_a_job_with_no_fields_has_an_empty_payload_and_rebuilds_from_null() -> None:
    class Ping(Job):
        name = "ping"

    assert Ping().to_payload() == {}
    assert Ping.from_payload(None) == Ping()


def test_the_default_backoff_doubles_from_one_second_and_stops_at_64() -> None:
    delays = [job_backoff(n).total_seconds() for n in range(1, 10)]

    assert delays == [1, 2, 4, 8, 16, 32, 64, 64, 64]


def test_the_default_backoff_is_jittered_around_that_curve_by_up_to_a_fifth() -> None:
    job = Everything(text="a", count=1)
    for attempt in range(1, 10):
        exact = job_backoff(attempt).total_seconds()
        delays = {job.backoff(attempt).total_seconds() for _ in range(50)}

        assert all(0.8 * exact <= d <= 1.2 * exact for d in delays), (attempt, delays)
        assert len(delays) > 1, "jobs that failed together come back apart"


def test_the_queue_may_be_chosen_per_job_by_a_method() -> None:
    class Tenant(Job):
        name = "tenant"
        tenant: str

        def queue(self) -> str:  # type: ignore[override]
            return f"tenant-{self.tenant}"

    assert Tenant(tenant="acme").queue_name() == "tenant-acme"


def test_a_function_becomes_a_job_with_its_parameters_as_fields() -> None:
    seen: list[tuple[int, str]] = []

    @job(name="resize", queue="media", tries=5, timeout=timedelta(seconds=3))
    def resize(ctx: JobContext, width: int, path: str = "a.png") -> None:
        seen.append((width, path))

    built = resize(200)

    assert built.to_payload() == {"width": 200, "path": "a.png"}
    assert built.queue_name() == "media"
    assert resize.job_class.tries == 5
    assert resize.job_class.timeout_delta() == timedelta(seconds=3)
    with pytest.raises(PayloadError):
        resize("wide")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="resize"):
        resize(1, "a", "extra")  # type: ignore[call-arg]


def test_the_registry_refuses_two_jobs_under_one_name() -> None:
    class One(Job):
        name = "same"

    class Two(Job):
        name = "same"

    registry = JobRegistry([One])
    with pytest.raises(ValueError, match="two jobs claim the name `same`"):
        registry.register(Two)


def test_an_unknown_name_names_what_is_registered() -> None:
    registry = JobRegistry([Everything])

    with pytest.raises(UnknownJob, match=r"`missing`.*`everything`"):
        registry.build(QueuedJob.create("missing", {}))


def test_an_envelope_round_trips_through_its_documented_json_form() -> None:
    envelope = QueuedJob.create(
        "everything",
        {"text": "é", "count": 1},
        queue="q",
        delay=timedelta(seconds=5),
        headers={"traceparent": "x"},
    ).with_changes(unique_key="unique:everything:1")

    text = envelope.to_json()
    back = QueuedJob.from_json(text)

    assert back == envelope
    assert '"v":1' in text
    assert QueuedJob.from_json('{"id":"1","name":"n","payload":null,"extra":"ignored"}').name == "n"


@pytest.mark.parametrize(
    "body", ["not json", "[]", '{"name":"x"}', '{"id":"1","payload":1}', b"\xff"]
)
def test_a_body_that_is_not_an_envelope_is_a_clear_payload_error(body: str | bytes) -> None:
    with pytest.raises(PayloadError, match="not a job envelope"):
        QueuedJob.from_json(body)


@pytest.mark.parametrize(
    "payload",
    [
        None,
        'é\u2028\x00"\\',
        [1, -0.0, 1e300, 10**30, {"a": [True, False, None]}],
        {2: "int key", True: "bool key", None: "none key", 1.5: "float key"},
    ],
)
def test_a_payload_is_encoded_exactly_as_compact_json_dumps_would(payload: object) -> None:
    expected = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    assert encode_payload(payload) == expected
    assert decode_payload(encode_payload(payload)) == json.loads(expected)


def _circular() -> list[object]:
    loop: list[object] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    "payload",
    [float("nan"), {"when": datetime.now(UTC)}, {(1, 2): "tuple key"}, {1, 2}, _circular()],
    ids=["nan", "datetime", "tuple-key", "set", "circular"],
)
def test_a_payload_that_is_not_json_is_a_payload_error_every_time(payload: object) -> None:
    for _ in range(2):  # a failed encode leaves nothing behind for the next one
        with pytest.raises(PayloadError, match="not JSON-serialisable"):
            encode_payload(payload)
    assert encode_payload({"after": [1, 2]}) == '{"after":[1,2]}'


def test_job_ids_are_distinct_uuid7s_that_sort_by_the_millisecond_they_were_made() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_job_id() for _ in range(10_000)]
    after = time.time_ns() // 1_000_000

    assert len(set(ids)) == len(ids)
    for text in ids[:100]:
        parsed = UUID(text)
        assert str(parsed) == text
        assert (parsed.version, parsed.variant) == (7, RFC_4122)
        assert before <= parsed.int >> 80 <= after
    stamps = [UUID(text).int >> 80 for text in ids]
    assert stamps == sorted(stamps)


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 12, 2, 13, 0, tzinfo=UTC), "2026-12-02T13:00:00.000000Z"),
        (
            datetime(2026, 12, 2, 18, 30, 0, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
            "2026-12-02T13:00:00.000005Z",
        ),
        (datetime(999, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "0999-01-02T03:04:05.678901Z"),
    ],
)
def test_envelope_times_are_written_in_utc_with_microseconds_and_a_z(
    moment: datetime, text: str
) -> None:
    assert format_time(moment) == text
    assert parse_time(text) == moment


@pytest.mark.parametrize(
    "text",
    ["2026-12-02T18:30:00.5+05:30", "2026-12-02T13:00:00.5+00:00", "2026-12-02T13:00:00.5"],
)
def test_envelope_times_with_an_offset_or_none_are_read_as_utc(text: str) -> None:
    # Other producers may write an offset, or none (taken as UTC).
    moment = parse_time(text)
    assert moment.tzinfo is UTC
    assert moment == datetime(2026, 12, 2, 13, 0, 0, 500000, tzinfo=UTC)


def test_with_changes_copies_every_envelope_field_and_changes_only_those_named() -> None:
    original = QueuedJob(
        id="j1",
        name="n",
        payload={"a": [1]},
        queue="q",
        attempts=2,
        max_attempts=5,
        available_at=datetime(2026, 1, 1, tzinfo=UTC),
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        unique_key="k",
        headers={"h": "v"},
    )
    assert original.with_changes() == original
    others: dict[str, object] = {
        "id": "j2",
        "name": "m",
        "payload": None,
        "queue": "r",
        "attempts": 3,
        "max_attempts": 6,
        "available_at": datetime(2027, 1, 1, tzinfo=UTC),
        "created_at": datetime(2024, 1, 1, tzinfo=UTC),
        "unique_key": None,
        "headers": {},
    }
    assert set(others) == {f.name for f in dataclasses.fields(QueuedJob)}
    for name, value in others.items():
        changed = original.with_changes(**{name: value})
        assert getattr(changed, name) == value
        assert dataclasses.replace(changed, **{name: getattr(original, name)}) == original
    with pytest.raises(TypeError, match="no field.*colour"):
        original.with_changes(colour="red")


def test_microseconds_since_the_epoch_allow_for_any_offset_and_round_trip() -> None:
    moment = datetime(2026, 12, 2, 13, 0, 0, 123456, tzinfo=UTC)
    expected = 1_796_216_400_123_456

    assert to_micros(moment) == expected
    assert to_micros(moment.astimezone(timezone(timedelta(hours=-7, minutes=-30)))) == expected
    assert from_micros(expected) == moment
    assert to_micros(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == -1
    naive = datetime(2026, 12, 2, 13, 0)  # local time, as datetime.astimezone reads it
    assert to_micros(naive) == to_micros(naive.astimezone(UTC))


def test_whether_a_handler_is_async_is_answered_again_when_it_is_replaced() -> None:
    from rainier_queue.job import is_async_handler

    class Swapped(Job):
        name = "swapped"

        async def handle(self, ctx: JobContext) -> None:
            return None

    assert is_async_handler(Swapped)
    assert is_async_handler(Swapped), "asked twice, the same answer"

    def plain(self: Job, ctx: JobContext) -> None:
        return None

    Swapped.handle = plain  # type: ignore[assignment,method-assign]
    assert not is_async_handler(Swapped)


class _Shade(enum.Enum):
    LIGHT = "light"
    DARK = "dark"


class _Paint(Job):
    name = "paint"
    room: str
    coats: int
    shade: _Shade

    async def handle(self, ctx: JobContext) -> None:
        pass


def test_a_job_built_with_several_wrong_fields_names_them_all_and_the_enums_choices() -> None:
    with pytest.raises(PayloadError) as caught:
        _Paint(room=3, coats="two", shade="light")  # type: ignore[arg-type]

    text = str(caught.value)
    assert "3 problems" in text
    assert "`room`: expected `str`, got `int`" in text
    assert "`coats`: expected `int`, got `str`" in text
    assert '`shade`: expected a _Shade, got str; allowed: "light", "dark"' in text
