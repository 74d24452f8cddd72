# SPDX-License-Identifier: MIT
"""The RabbitMQ driver's frame reader gives aiormq exactly what pamqp would, however the
bytes arrive, and ends a broken stream with aiormq's own errors.

The reader decodes a delivery's three frames by hand (frames.py); these
tests hold each of its decodings to pamqp's on the same bytes, fed through
an asyncio stream in chunks cut at every kind of place, so a frame split
across two socket reads is read as one. The driver's own tests, on the
real broker, run every delivery through it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import aiormq.connection
import pytest
from aiormq.exceptions import AMQPConnectionError, InvalidFrameError, ProtocolSyntaxError
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp import frame as pamqp_frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader
from pamqp.heartbeat import Heartbeat

from rainier_queue.drivers.rabbitmq import frames
from rainier_queue.drivers.rabbitmq.frames import FrameReader

from .amqp_strategies import properties, short_text

delivers = st.builds(
    spec.Basic.Deliver,
    consumer_tag=short_text,
    delivery_tag=st.integers(0, 2**63 - 1),
    redelivered=st.booleans(),
    exchange=st.from_regex(r"[a-zA-Z0-9_.:\-]{0,40}", fullmatch=True),
    routing_key=short_text,
)


@st.composite
def deliveries(draw: st.DrawFn) -> list[tuple[int, Any]]:
    """A delivery's frames, on some channel: method, content header, body (none if empty)."""
    channel = draw(st.integers(1, 2047))
    body = draw(st.binary(max_size=300))
    header = ContentHeader(0, len(body), draw(properties()))
    content = [(channel, ContentBody(body))] if body else []
    return [(channel, draw(delivers)), (channel, header), *content]


others = st.sampled_from(
    [
        (0, Heartbeat()),
        (1, spec.Basic.Ack(delivery_tag=7, multiple=True)),
        (1, spec.Basic.QosOk()),
        (3, spec.Channel.Close(406, "PRECONDITION_FAILED - no", 50, 10)),
        (0, spec.Connection.Blocked(reason="low on memory")),
        (2, spec.Basic.GetEmpty()),
        (2, spec.Basic.ConsumeOk(consumer_tag="ctag-1")),
    ]
)


def shown(frame: Any) -> Any:
    """A frame as comparable data: its class and every field, properties included."""
    if isinstance(frame, ContentBody):
        return ("body", frame.value)
    if isinstance(frame, ContentHeader):
        return ("header", frame.class_id, frame.weight, frame.body_size, dict(frame.properties))
    if isinstance(frame, Heartbeat):
        return ("heartbeat",)
    return (type(frame).__qualname__, dict(frame))


async def read_all(data: bytes, cuts: list[int]) -> list[tuple[int, int, Any]]:
    """Every frame a `FrameReader` reads from `data`, fed to its stream in pieces at `cuts`."""
    stream = asyncio.StreamReader()
    reader = FrameReader(stream)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]

    async def feed() -> None:
        pieces = list(itertools.pairwise(bounds))
        for n, (start, end) in enumerate(pieces):
            stream.feed_data(data[start:end])
            if n < len(pieces) - 1:
                await asyncio.sleep(0)
        # With the last piece, as a server closing after its last frame: aiormq too reads
        # that as the end of the frames, and an end it waits for as a lost connection.
        stream.feed_eof()

    feeding = asyncio.create_task(feed())
    out = [item async for item in reader]
    await feeding
    return out


@settings(max_examples=100, deadline=None)
@given(
    frames_in=st.lists(deliveries() | others.map(lambda f: [f]), min_size=1, max_size=6).map(
        lambda groups: [f for group in groups for f in group]
    ),
    cuts=st.lists(st.integers(0, 4000), max_size=8),
)
def test_every_frame_reads_as_pamqp_reads_it_however_the_stream_is_cut(
    frames_in: list[tuple[int, Any]], cuts: list[int]
) -> None:
    wire = [pamqp_frame.marshal(frame, channel) for channel, frame in frames_in]
    expected = []
    for raw in wire:
        used, channel, frame = pamqp_frame.unmarshal(raw)
        expected.append((used, channel, shown(frame)))
    got = asyncio.run(read_all(b"".join(wire), cuts))
    assert [(used, channel, shown(frame)) for used, channel, frame in got] == expected


def test_a_delivery_is_decoded_by_hand_not_by_pamqp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken for a delivery's three frames (else this reader is aiormq's
    speed with more code): with pamqp's decoder out of reach they are still read."""
    channel = 1
    body = b'{"id": "j1"}'
    wire = b"".join(
        pamqp_frame.marshal(f, channel)
        for f in (
            spec.Basic.Deliver("ctag", 42, False, "", "rq.default"),
            ContentHeader(
                0,
                len(body),
                spec.Basic.Properties(
                    content_type="application/json",
                    delivery_mode=2,
                    message_id="j1",
                    headers={"x-delivery-count": 2},
                ),
            ),
            ContentBody(body),
        )
    )

    def refuse(data: bytes) -> Any:
        raise AssertionError("pamqp's decoder was used for a delivery frame")

    monkeypatch.setattr(pamqp_frame, "unmarshal", refuse)
    deliver, header, content = (f for _, _, f in asyncio.run(read_all(wire, [5, 60, 61])))
    assert (deliver.delivery_tag, deliver.consumer_tag, deliver.routing_key) == (
        42,
        "ctag",
        "rq.default",
    )
    assert header.properties.headers == {"x-delivery-count": 2}
    assert header.properties.message_id == "j1"
    assert content.value == body


def test_a_stream_that_ends_inside_a_frame_is_a_lost_connection() -> None:
    raw = pamqp_frame.marshal(spec.Basic.Ack(delivery_tag=1), 1)
    with pytest.raises(AMQPConnectionError, match="unexpectedly closed"):
        asyncio.run(read_all(raw + raw[:9], []))


def test_a_stream_that_ends_between_frames_ends_the_frames() -> None:
    raw = pamqp_frame.marshal(spec.Basic.Ack(delivery_tag=1), 1)
    got = asyncio.run(read_all(raw * 2, [len(raw)]))
    assert [shown(f) for _, _, f in got] == [shown(spec.Basic.Ack(delivery_tag=1))] * 2


def test_a_frame_without_its_end_byte_is_an_invalid_frame() -> None:
    raw = bytearray(pamqp_frame.marshal(spec.Basic.Ack(delivery_tag=1), 1))
    raw[-1] = 0
    with pytest.raises(InvalidFrameError, match="no end"):
        asyncio.run(read_all(bytes(raw), []))


def test_a_delivery_frame_that_lies_about_its_fields_is_an_invalid_frame() -> None:
    """A `basic.deliver` whose short string runs past its frame: the hand decoder gives it
    to pamqp, which refuses it, and aiormq hears `InvalidFrameError` as it would have."""
    good = pamqp_frame.marshal(spec.Basic.Deliver("ctag", 1, False, "", "rk"), 1)
    bad = bytearray(good)
    bad[11] = 200  # the consumer tag's length: far past the frame's end
    with pytest.raises(InvalidFrameError):
        asyncio.run(read_all(bytes(bad), []))


def test_a_server_answering_with_a_protocol_header_is_refused_as_aiormq_refuses_it() -> None:
    with pytest.raises(ProtocolSyntaxError, match="protocol header"):
        asyncio.run(read_all(b"AMQP\x00\x00\x09\x01", []))


def test_installing_puts_the_reader_under_aiormqs_name_once() -> None:
    assert frames.install()
    assert aiormq.connection.FrameReceiver is FrameReader
    assert frames.install()  # again: nothing changes
    assert aiormq.connection.FrameReceiver is FrameReader
