# SPDX-License-Identifier: MIT
"""A batch of publishes written to the socket as one block, each with its own confirm.

Why: aiormq publishes one message per call, and each call takes the
channel's lock, opens a timeout scope, puts a frame block on the
connection's write queue and makes one socket write. Pushing 5,000 jobs
made 5,000 `send` calls, and a `push_many` ran at about 0.7 times
Dramatiq's rate, though Dramatiq does not wait for confirms. Here the lock
is taken once per batch, every message is given its delivery tag and
confirmation future exactly as aiormq's own publish gives them, so that
aiormq's reader settles them as before (an ack, a nack, a returned
message, a channel that closed), and the frames of every message go out in
one block. A message's frames are written by `encode`, byte for byte what
pamqp writes, with the properties a job carries (its type, persistence and
id) packed by hand; any other property goes through pamqp's encoder.

What it relies on: aiormq 7's channel keeps its publishes in
`delivery_tag`, `confirmations` and `message_id_delivery_tag`, and writes
through the connection's `write_queue`. On another aiormq
(aiormq_seams.py), or a channel without confirms, each message goes
through aiormq's `basic_publish` as before.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Sequence
from typing import Any

import aiormq
from aiormq.abc import ChannelFrame
from pamqp import commands as spec

from .aiormq_seams import in_use

Message = tuple[str, bytes, spec.Basic.Properties]
"""A publish to the default exchange: routing key (the queue's name), body, properties."""


FRAME = struct.Struct(">BHI")
"""A frame's type, channel and payload size."""
END = b"\xce"
PUBLISH = struct.Struct(">HHHB")
"""`basic.publish`'s class and method, its reserved ticket, and an empty exchange's length."""
MANDATORY = b"\x01"
"""The publish's bits: mandatory, not immediate."""
HEADER = struct.Struct(">HHQ")
"""A content header's class, weight and body size (its property flags and values follow)."""
CONTENT_TYPE, DELIVERY_MODE, MESSAGE_ID = 0x8000, 0x1000, 0x0080
PACKED_BY_HAND = ("content_type", "delivery_mode", "message_id")
OTHERS = tuple(name for name in spec.Basic.Properties.flags if name not in PACKED_BY_HAND)


def encode(
    channel_number: int,
    routing_key: str,
    body: bytes,
    props: spec.Basic.Properties,
    max_content: int,
) -> bytes:
    """One mandatory publish to the default exchange as its frames: the method, the content
    header, and the body cut into frames of at most `max_content` bytes."""
    key = routing_key.encode()
    method = b"".join((PUBLISH.pack(60, 40, 0, 0), bytes((len(key),)), key, MANDATORY))
    header = HEADER.pack(60, 0, len(body)) + _properties(props)
    parts = [FRAME.pack(1, channel_number, len(method)), method, END]
    parts += (FRAME.pack(2, channel_number, len(header)), header, END)
    for start in range(0, len(body), max_content):
        chunk = body[start : start + max_content]
        parts += (FRAME.pack(3, channel_number, len(chunk)), chunk, END)
    return b"".join(parts)


def _properties(props: spec.Basic.Properties) -> bytes:
    """The property flags and values as pamqp writes them: by hand for a job's (its type,
    persistence and id), by pamqp for any others."""
    if any(getattr(props, name) not in (None, "") for name in OTHERS):
        return props.marshal()
    flags, parts = 0, []
    if props.content_type:
        flags |= CONTENT_TYPE
        parts.append(_short(props.content_type))
    if props.delivery_mode is not None:
        flags |= DELIVERY_MODE
        parts.append(bytes((props.delivery_mode,)))
    if props.message_id:
        flags |= MESSAGE_ID
        parts.append(_short(props.message_id))
    return flags.to_bytes(2, "big") + b"".join(parts)


def _short(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 255:
        raise ValueError(f"a short string of {len(raw)} bytes: AMQP allows 255")
    return bytes((len(raw),)) + raw


async def publish_batch(
    channel: aiormq.Channel, messages: Sequence[Message], timeout: float
) -> list[Exception | None]:
    """Publish `messages` (mandatory, to the default exchange) and wait up to `timeout`
    seconds for their confirms: for each, None (confirmed) or what aiormq's publish would
    raise for it (`PublishError` returned, `DeliveryError` nacked, `TimeoutError` no answer,
    the channel's or connection's error if it closed)."""
    if not messages:
        return []
    if not in_use() or not channel.publisher_confirms:
        return await _one_by_one(channel, messages, timeout)
    try:
        futures = await _write(channel, messages)
    except Exception as exc:  # nothing of the batch was written
        return [exc] * len(messages)
    try:
        async with asyncio.timeout(timeout):
            await asyncio.wait(futures)
    except TimeoutError:
        pass
    finally:
        for future in futures:  # what no answer came for (or the caller gave up on)
            future.cancel()
    return [_outcome(future, timeout) for future in futures]


async def _write(channel: aiormq.Channel, messages: Sequence[Message]) -> list[asyncio.Future[Any]]:
    """Write all the messages' frames as one block, each message given its delivery tag and
    confirmation under the channel's lock; if the block is not written, the tags go back."""
    encoded: list[bytes] = []
    ids: list[str] = []
    number, max_content = channel.number, channel.max_content_size
    for routing_key, body, properties in messages:
        # What a returned message is matched to its publish by (a job's id here; aiormq
        # gives a message without one a random id, and so does this).
        if not properties.message_id:
            properties.message_id = uuid.uuid4().hex
        ids.append(properties.message_id)
        encoded.append(encode(number, routing_key, body, properties, max_content))
    block = ChannelFrame(payload=b"".join(encoded), should_close=False)
    futures: list[asyncio.Future[Any]] = []
    async with channel.lock:  # the tags in the order the block is written
        first = channel.delivery_tag
        try:
            for message_id in ids:
                channel.delivery_tag += 1
                tag = channel.delivery_tag
                future = channel.create_future()
                channel.confirmations[tag] = future
                channel.message_id_delivery_tag[message_id] = tag
                future.add_done_callback(_forgetting(channel, message_id, tag))
                futures.append(future)
            await channel.write_queue.put(block)
        except BaseException:
            for tag in range(first + 1, channel.delivery_tag + 1):
                channel.confirmations.pop(tag, None)
            channel.delivery_tag = first
            for future in futures:
                future.cancel()
            raise
    return futures


def _forgetting(channel: aiormq.Channel, message_id: str, tag: int) -> Any:
    def forget(_: asyncio.Future[Any]) -> None:
        if channel.message_id_delivery_tag.get(message_id) == tag:
            channel.message_id_delivery_tag.pop(message_id, None)

    return forget


def _outcome(future: asyncio.Future[Any], timeout: float) -> Exception | None:
    if future.cancelled():
        return TimeoutError(f"no confirm from the broker within {timeout:g}s")
    error = future.exception()
    if error is None or isinstance(error, Exception):
        return error
    # aiormq rejects what waits on a channel that closed with the reason it closed, which
    # may be a cancellation: never a confirm.
    return ConnectionError(f"the channel closed before the confirm came ({error!r})")


async def _one_by_one(
    channel: aiormq.Channel, messages: Sequence[Message], timeout: float
) -> list[Exception | None]:
    """aiormq's own publish per message, side by side (where a batch cannot be written)."""
    answers = await asyncio.gather(
        *(_publish_one(channel, message, timeout) for message in messages),
        return_exceptions=True,
    )
    return [
        answer
        if isinstance(answer, Exception)
        else None
        if answer is None
        else ConnectionError(f"the publish ended without a confirm ({answer!r})")
        for answer in answers
    ]


async def _publish_one(channel: aiormq.Channel, message: Message, timeout: float) -> None:
    routing_key, body, properties = message
    await channel.basic_publish(
        body,
        routing_key=routing_key,
        properties=properties,
        mandatory=True,
        timeout=timeout,
        wait=False,
    )


__all__ = ["Message", "publish_batch"]
