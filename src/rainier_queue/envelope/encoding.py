# SPDX-License-Identifier: MIT
"""The JSON text a payload and its headers are stored as, written once per job and checked.

A driver that stores columns (the SQL tables) keeps a job's payload and
headers as JSON text of their own, apart from the envelope's other fields.
What goes in is refused here, at dispatch, if a worker could not read it
back (not JSON, nested too deeply, too large), where the caller can still
do something about it; what comes out is read with the same checks as any
stored entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..errors import PayloadError
from .fields import check_payload_text, parse_json
from .model import JSONValue

# Encoders made once, not per payload: `json.dumps` with any non-default option
# builds a new encoder on every call, which a bulk push of many small payloads
# pays per job. The payload encoder keeps no table of the containers it is in
# (`check_circular=False`): that bookkeeping costs a tenth of the encode, and a
# payload that holds itself still fails, as too deep to encode. This is the
# supported path; the private C encoder factory CPython keeps, built once, was cheaper:
# on the `bench.studies.dispatch_cost` payload, callgrind counts 44,600 instructions
# per payload against 37,300 (the public `encode` builds its C encoder per call).
_COMPACT = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)


def encode_payload(payload: JSONValue) -> str:
    """Payload as compact JSON text, or a `PayloadError` naming what is not JSON.

    What a worker would refuse to read back (nested too deeply, too large)
    is refused here, where the caller can still do something about it.
    """
    try:
        text = _COMPACT.encode(payload)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"the payload is not JSON-serialisable: {exc}") from exc
    except RecursionError:
        raise PayloadError(
            "the payload is not JSON-serialisable: it refers to itself, or is nested too deeply"
        ) from None
    check_payload_text(text)
    return text


def encode_headers(headers: Mapping[str, str]) -> str:
    """Headers as compact JSON text (`{}` when there are none, as there mostly are)."""
    return _COMPACT.encode(dict(headers)) if headers else "{}"


def decode_payload(text: str | bytes) -> JSONValue:
    """The inverse of `encode_payload`: a `MalformedEntry` for text it could not have written."""
    return parse_json(text, "payload")
