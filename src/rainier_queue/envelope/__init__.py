# SPDX-License-Identifier: MIT
"""The wire form: what a job becomes to be stored, and what storage becomes to be a job again.

Everything that decides what travels through a queue, and how it reads
back, sits in this one package, so a change to the stored form is a change
here and nowhere else:

- `model`: `QueuedJob`, the envelope, and its documented JSON form;
- `encoding`: the JSON text a payload and its headers are stored as;
- `fields`: the checks on every stored field, each naming the field it refuses;
- `reading`: storage read totally, into a job or a `Malformed` record;
- `packing`: a `Job` packed into its envelope at dispatch.

The package itself hands out the model and the encoding (`from
rainier_queue.envelope import QueuedJob`), which is all most code needs;
`rainier_queue.stored`, `rainier_queue.entry_fields` and
`rainier_queue.packing`, where the other three lived, still re-export them.
"""

from __future__ import annotations

from .encoding import decode_payload, encode_headers, encode_payload
from .model import JSONValue, QueuedJob, format_time, new_job_id, new_job_ids, parse_time

__all__ = [
    "JSONValue",
    "QueuedJob",
    "decode_payload",
    "encode_headers",
    "encode_payload",
    "format_time",
    "new_job_id",
    "new_job_ids",
    "parse_time",
]
