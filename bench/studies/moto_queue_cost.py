# SPDX-License-Identifier: MIT
"""What does one SQS receive cost moto as its queue grows, and what do the tests' repairs save?

Why it is asked: the backlog fault test (20,000 jobs through 4 worker
processes) drained 1,000 jobs in 83 s and 2,000 in 261 s on the tests'
moto server: about the square of the count, so 20,000 would take hours.
SQS's cost a call does not grow with the queue; moto's does. This takes
the server, HTTP and the driver out: moto's SQS backend in this process,
one standard queue of `N` messages, and for each `N` the mean wall time of
a send, of a receive of ten (300 s visibility, no wait) and of deleting the ten it
gave, first on moto as it ships, then with tests/moto_fast.py applied
(the tests' server applies it). The two rounds run on separate queues of
the same length; the plain round stops at `--plain-up-to` messages,
since it alone takes seconds a call there.

    .venv/bin/python -m bench.studies.moto_queue_cost --sizes 1000 2000 5000 20000
"""

from __future__ import annotations

import argparse
import time

from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs import models
from tests import moto_fast

CALLS = 10


def one_size(name: str, messages: int) -> tuple[float, float, float]:
    """Mean seconds of a send, of a receive of ten and of deleting those ten, on a queue of
    `messages`."""
    backend = models.sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    backend.create_queue(name)
    for _ in range(messages):
        backend.send_message(name, "x" * 300)
    time.sleep(0.01)  # moto shows a message sent in this millisecond from the next one
    began = time.perf_counter()
    for _ in range(CALLS):
        backend.send_message(name, "x" * 300)
    sent = time.perf_counter() - began
    received = deleted = 0.0
    for _ in range(CALLS):
        began = time.perf_counter()
        got = backend.receive_message(name, 10, 0, 300)
        received += time.perf_counter() - began
        began = time.perf_counter()
        for message in got:
            backend.delete_message(name, message.receipt_handle)  # type: ignore[arg-type]
        deleted += time.perf_counter() - began
    backend.delete_queue(name)
    return sent / CALLS, received / CALLS, deleted / CALLS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--plain-up-to", type=int, default=2000)
    args = parser.parse_args()
    rows: list[tuple[str, int, float, float, float]] = []
    for size in args.sizes:
        if size <= args.plain_up_to:
            rows.append(("moto as shipped", size, *one_size(f"plain{size}", size)))
    moto_fast.patch()
    for size in args.sizes:
        rows.append(("with moto_fast", size, *one_size(f"fast{size}", size)))
    for label, size, send, receive, delete in rows:
        print(
            f"{label:16} queue of {size:6}: a send {send * 1000:7.1f} ms,"
            f" a receive of 10 {receive * 1000:8.1f} ms, deleting them {delete * 1000:7.1f} ms"
        )


if __name__ == "__main__":
    main()
