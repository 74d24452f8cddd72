# SPDX-License-Identifier: MIT
"""Hypothesis strategies for AMQP message properties, shared by the RabbitMQ driver's frame
reading and writing tests (test_amqp_frames.py, test_amqp_publish_frames.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp.common import FieldTable

short_text = st.text(max_size=40).filter(lambda s: len(s.encode()) < 256)
field_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
headers = st.none() | st.dictionaries(st.text(min_size=1, max_size=12), field_values, max_size=4)


@st.composite
def properties(draw: st.DrawFn) -> spec.Basic.Properties:
    def maybe(values: st.SearchStrategy[Any]) -> Any:
        return draw(st.none() | values)

    stamp = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2100, 1, 1)).map(
        lambda d: d.replace(microsecond=0, tzinfo=dt.UTC)
    )
    return spec.Basic.Properties(
        content_type=maybe(short_text),
        content_encoding=maybe(short_text),
        headers=cast(FieldTable | None, draw(headers)),
        delivery_mode=maybe(st.sampled_from([1, 2])),
        priority=maybe(st.integers(0, 255)),
        correlation_id=maybe(short_text),
        reply_to=maybe(short_text),
        expiration=maybe(st.integers(0, 10**9).map(str)),
        message_id=maybe(short_text),
        timestamp=maybe(stamp),
        message_type=maybe(short_text),
        user_id=maybe(short_text),
        app_id=maybe(short_text),
    )


job_properties = st.builds(
    spec.Basic.Properties,
    content_type=st.none() | st.just("") | short_text,
    delivery_mode=st.none() | st.sampled_from([1, 2]),
    message_id=st.none() | st.just("") | short_text,
)
"""Only what a job's message carries (its type, persistence and id), each maybe absent."""
