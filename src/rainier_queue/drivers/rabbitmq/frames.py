# SPDX-License-Identifier: MIT
"""Reading AMQP frames a socket read at a time, and a job's three frames by hand.

Why: a worker on RabbitMQ spent about 45% of its busy time in aiormq's
reader (bench/README.md, issue 30). Every delivery is three frames (the
`basic.deliver` method, the content header, the body), and aiormq reads
each with three awaited `readexactly` calls through a `BytesIO` and a lock,
then decodes it with pamqp's generic decoder, which walks each field by
its type name. Here, one `read` takes whatever the socket holds (up to
64 KiB, dozens of deliveries while the worker is busy), every whole frame
is cut out of it, and the three kinds a delivery is made of are decoded
with a few `struct` calls into the very pamqp objects aiormq expects.
Every other frame (the handshake, confirms, `get-ok`, closes, a content
header with flags this does not know) goes through pamqp as before.

How it is put in: aiormq builds its receiver by name when it connects
(`aiormq.connection.FrameReceiver`), and offers no other seam, so `install`
puts this subclass under that name, for every aiormq connection in the
process. It yields the same frames in the same order, and the same errors
(`AMQPConnectionError` for a connection that ends, `InvalidFrameError` for
bytes that are not a frame), so other aio-pika users in the process see no
difference but speed. It is installed only over the aiormq it was written
for (aiormq_seams.py); on another, aiormq's own reader stays.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

import aiormq.connection
from aiormq.exceptions import AMQPConnectionError, InvalidFrameError, ProtocolSyntaxError
from pamqp import commands as spec
from pamqp import decode
from pamqp import frame as pamqp_frame
from pamqp.body import ContentBody
from pamqp.exceptions import PAMQPException
from pamqp.header import ContentHeader

from .aiormq_seams import put_in

READ_SIZE = 65536
"""Bytes asked of the socket per read: many deliveries' frames at once."""
FRAME_END = 0xCE
OUTER = struct.Struct(">BHI")
"""A frame's type, channel and payload size."""
METHOD_IDS = struct.Struct(">HH")
DELIVER_IDS = (60, 60)
"""Class and method of `basic.deliver`."""
HEADER_START = struct.Struct(">HHQH")
"""A content header's class, weight, body size and first property flags."""
LONGLONG = struct.Struct(">q")
"""Signed, as pamqp reads a long-long (a delivery tag never comes near the sign bit)."""
TYPE_METHOD, TYPE_HEADER, TYPE_BODY = 1, 2, 3

# The Basic properties in their wire order, with their flag and how each is written.
PROPERTIES: tuple[tuple[str, int, str], ...] = tuple(
    (name, flag, spec.Basic.Properties.amqp_type(name))
    for name, flag in spec.Basic.Properties.flags.items()
)
KNOWN_KINDS = {"shortstr", "octet", "table", "timestamp"}
if {kind for _, _, kind in PROPERTIES} - KNOWN_KINDS:  # pragma: no cover - a pamqp change
    PROPERTIES = ()  # every content header then goes through pamqp

BaseReceiver: type[Any] = aiormq.connection.FrameReceiver
"""aiormq's own receiver, as it was before `install`."""


class FrameError(ValueError):
    """Bytes the fast decoders do not take: pamqp decodes the frame (or says what is wrong)."""


def short_str(data: bytearray, at: int) -> tuple[str, int]:
    size = data[at]
    end = at + 1 + size
    if end > len(data):
        raise FrameError("short string past the frame")
    return data[at + 1 : end].decode(), end


def decode_deliver(data: bytearray, start: int, end: int) -> spec.Basic.Deliver:
    """`basic.deliver` from the method frame's payload `data[start:end]`."""
    at = start + 4
    consumer_tag, at = short_str(data, at)
    if at + 9 > end:
        raise FrameError("basic.deliver cut short")
    (delivery_tag,) = LONGLONG.unpack_from(data, at)
    redelivered = bool(data[at + 8] & 1)
    exchange, at = short_str(data, at + 9)
    routing_key, at = short_str(data, at)
    if at != end:
        raise FrameError("basic.deliver is not the size its frame says")
    # As pamqp's own decoder does, a received frame's fields are set without validate().
    frame = spec.Basic.Deliver.__new__(spec.Basic.Deliver)
    frame.consumer_tag = consumer_tag
    frame.delivery_tag = delivery_tag
    frame.redelivered = redelivered
    frame.exchange = exchange
    frame.routing_key = routing_key
    return frame


def decode_header(data: bytearray, start: int, end: int) -> ContentHeader:
    """A content header from its frame's payload `data[start:end]`."""
    if not PROPERTIES or end - start < HEADER_START.size:
        raise FrameError("not a content header this reads")
    class_id, weight, body_size, flags = HEADER_START.unpack_from(data, start)
    if flags & 1:
        raise FrameError("a second word of property flags")  # none of Basic's uses one
    at = start + HEADER_START.size
    properties = spec.Basic.Properties()
    for name, flag, kind in PROPERTIES:
        if not flags & flag:
            continue
        value: Any
        if kind == "shortstr":
            value, at = short_str(data, at)
        elif kind == "octet":
            value, at = data[at], at + 1
        elif kind == "table":
            used, value = decode.field_table(bytes(data[at:end]))
            at += used
        else:
            used, value = decode.timestamp(bytes(data[at : at + 8]))
            at += used
        if at > end:
            raise FrameError("content header properties past the frame")
        setattr(properties, name, value)
    if at != end:
        raise FrameError("content header is not the size its frame says")
    header = ContentHeader(weight, body_size, properties)
    header.class_id = class_id
    return header


class FrameReader(BaseReceiver):  # type: ignore[misc]
    """aiormq's frame receiver, reading the socket in bulk and a delivery's frames by hand."""

    started: bool
    """Whether the first frame's bytes were read (aiormq's: a protocol header then is refused)."""

    def __init__(self, reader: Any) -> None:
        super().__init__(reader)
        self._data = bytearray()
        self._ready: deque[tuple[int, int, Any]] = deque()

    async def get_frame(self) -> Any:
        ready = self._ready
        if ready:
            return ready.popleft()
        async with self.lock:
            while not ready:
                await self._fill()
            return ready.popleft()

    async def _fill(self) -> None:
        """Read what the socket has and cut every whole frame out of it."""
        reader = self.reader
        if not self._data and reader.at_eof():
            del self.reader
            raise StopAsyncIteration
        try:
            chunk = await reader.read(READ_SIZE)
        except ConnectionRefusedError as exc:
            raise AMQPConnectionError(f"Server connection refused: {exc!r}") from exc
        except ConnectionResetError as exc:
            raise AMQPConnectionError(f"Server connection reset: {exc!r}") from exc
        except ConnectionError as exc:
            raise AMQPConnectionError(f"Server connection error: {exc!r}") from exc
        except OSError as exc:
            raise AMQPConnectionError(f"Server communication error: {exc!r}") from exc
        if not chunk:
            raise AMQPConnectionError(
                "Server connection unexpectedly closed. "
                f"Read {len(self._data)} bytes of a frame and then the end of the stream"
            )
        data = self._data
        data += chunk
        if not self.started and len(data) >= 7:
            if data.startswith(b"AMQP"):
                raise ProtocolSyntaxError("Unexpected AMQP protocol header")
            self.started = True
        self._cut(data)

    def _cut(self, data: bytearray) -> None:
        at, size_of, ready = 0, len(data), self._ready
        while size_of - at >= 8:
            kind, channel, size = OUTER.unpack_from(data, at)
            start, end = at + 7, at + 7 + size
            if end >= size_of:
                break
            if data[end] != FRAME_END:
                raise InvalidFrameError(f"frame of type {kind} on channel {channel} has no end")
            ready.append((end + 1 - at, channel, self._decode(data, at, kind, start, end)))
            at = end + 1
        if at:
            del data[:at]

    @staticmethod
    def _decode(data: bytearray, at: int, kind: int, start: int, end: int) -> Any:
        try:
            if kind == TYPE_BODY and end > start:  # pamqp refuses an empty one
                return ContentBody(bytes(data[start:end]))
            if kind == TYPE_METHOD and METHOD_IDS.unpack_from(data, start) == DELIVER_IDS:
                return decode_deliver(data, start, end)
            if kind == TYPE_HEADER:
                return decode_header(data, start, end)
        except Exception:  # whatever the hand decoders trip on, pamqp judges the frame
            pass  # pamqp decodes it below, or raises what aiormq's reader would have
        try:
            return pamqp_frame.unmarshal(bytes(data[at : end + 1]))[2]
        except PAMQPException as exc:
            raise InvalidFrameError(str(exc)) from exc


def install() -> bool:
    """Make aiormq's connections read frames with `FrameReader` (aiormq_seams.py)."""
    return put_in("FrameReceiver", BaseReceiver, FrameReader)


__all__ = ["FrameReader", "decode_deliver", "decode_header", "install"]
