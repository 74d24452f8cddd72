# SPDX-License-Identifier: MIT
"""The RabbitMQ driver writes a publish's frames byte for byte as aiormq and pamqp would
(publishing.py's `encode`), whatever the properties, and cuts a long body as aiormq does."""

from __future__ import annotations

from typing import Any

from aiormq.abc import ChannelFrame
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from rainier_queue.drivers.rabbitmq.publishing import encode

from .amqp_strategies import job_properties, properties

routing_keys = st.from_regex(r"[a-zA-Z0-9_.:\-]{1,255}", fullmatch=True)


def as_pamqp_writes_it(
    channel: int, key: str, body: bytes, props: spec.Basic.Properties, max_content: int
) -> bytes:
    """aiormq's `basic_publish` frames for the same message, through pamqp."""
    if not body:
        bodies = []
    else:
        bodies = [
            ContentBody(body[at : at + max_content]) for at in range(0, len(body), max_content)
        ]
    frames: list[Any] = [
        spec.Basic.Publish(exchange="", routing_key=key, mandatory=True),
        ContentHeader(properties=props, body_size=len(body)),
        *bodies,
    ]
    return ChannelFrame.marshall(channel_number=channel, frames=frames).payload


@settings(max_examples=300, deadline=None)
@given(
    channel=st.integers(1, 2047),
    key=routing_keys,
    body=st.binary(max_size=600),
    props=job_properties | properties(),
    max_content=st.integers(1, 700),
)
def test_a_publish_is_written_as_pamqp_writes_it(
    channel: int, key: str, body: bytes, props: spec.Basic.Properties, max_content: int
) -> None:
    assert encode(channel, key, body, props, max_content) == as_pamqp_writes_it(
        channel, key, body, props, max_content
    )


def test_a_jobs_message_is_packed_by_hand() -> None:
    """Without a property beyond a job's, pamqp's property encoder is not called."""
    props = spec.Basic.Properties(content_type="application/json", delivery_mode=2, message_id="j1")

    class Refusing(spec.Basic.Properties):
        def marshal(self) -> bytes:
            raise AssertionError("pamqp encoded a job's properties")

    refusing = Refusing(content_type="application/json", delivery_mode=2, message_id="j1")
    assert encode(1, "rq.jobs.default", b"{}", refusing, 1000) == as_pamqp_writes_it(
        1, "rq.jobs.default", b"{}", props, 1000
    )
