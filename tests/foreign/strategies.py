# SPDX-License-Identifier: MIT
"""Hypothesis strategies for what might be found in storage: noise, and envelopes nearly right.

`FUZZ_EXAMPLES` sets how hard the fuzz tests push: a short run by default
(CI), a long one with `RAINIER_QUEUE_FUZZ=long` (`make fuzz`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import strategies as st

from .catalog import DEEP, envelope

LONG = os.environ.get("RAINIER_QUEUE_FUZZ") == "long"
FUZZ_EXAMPLES = 3000 if LONG else 150
"""Examples for the fuzz tests of pure reading functions."""
STORAGE_EXAMPLES = 150 if LONG else 8
"""Examples for the fuzz tests that go through real storage and a real worker (slower)."""

ENVELOPE_FIELDS = (
    "v",
    "id",
    "name",
    "payload",
    "queue",
    "attempts",
    "max_attempts",
    "available_at",
    "created_at",
    "unique_key",
    "headers",
)

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "yesterday", "2026-13-01T00:00:00Z", "9999-12-31T23:59:59Z", "\x00"])
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)
"""Any JSON value, small, of every type."""

_TEXT_DAMAGE = (
    "none",
    "truncate",
    "bom",
    "nul",
    "surrogate",
    "not-utf8",
    "infinite-number",
    "nan",
    "deep",
)


@st.composite
def near_envelopes(draw: st.DrawFn, job_id: str, ledger: str = "") -> str | bytes:
    """The envelope of a `note` job with up to three fields dropped or replaced, then perhaps
    damaged as text: truncated, a BOM, a NUL, a lone surrogate, bytes that are not UTF-8,
    1e999, NaN, or 10,000 levels of nesting."""
    data: dict[str, Any] = envelope(job_id, job_id, ledger)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        key = draw(st.sampled_from(ENVELOPE_FIELDS))
        if draw(st.booleans()):
            data.pop(key, None)
        else:
            data[key] = draw(json_values)
    text = json.dumps(data)
    damage = draw(st.sampled_from(_TEXT_DAMAGE))
    if damage == "truncate":
        return text[: draw(st.integers(min_value=0, max_value=max(0, len(text) - 1)))]
    if damage == "bom":
        return "\ufeff" + text
    if damage == "nul":
        return text + "\x00"
    if damage == "surrogate":
        return text.replace(f'"{job_id}"', '"\\udc00"', 1)
    if damage == "not-utf8":
        return text.encode() + b"\xff"
    if damage == "infinite-number":
        return text.replace('"attempts": 0', '"attempts": 1e999')
    if damage == "nan":
        return text.replace('"max_attempts": 3', '"max_attempts": NaN')
    if damage == "deep":
        return text.replace('"headers": {}', f'"headers": {DEEP}')
    return text


stored_bodies = st.binary(max_size=64) | st.text(max_size=64) | st.sampled_from([DEEP, "", "{}"])
"""Noise: what a foreign producer might put where an envelope belongs."""

column_values = (
    st.none()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=16)
    | st.binary(max_size=16)
    | st.sampled_from(["{}", "[]", "null", DEEP, '{"text": "\\ud800"}'])
)
"""Anything a loosely typed SQLite column may hold."""
