# SPDX-License-Identifier: MIT
"""Does moto hand one SQS message to two receivers at once?

Why it is asked: the backlog fault test (20,000 jobs through 4 worker
processes) saw jobs on moto received twice within seconds, each receipt
with a visibility timeout far longer than the test, so one of them ran a
job another process was still running. SQS promises at-least-once, but a
message under a visibility timeout is not handed out again until it ends.
This takes the driver and the worker out:

- starts a private moto server (`tests.moto_server.start_server`), makes a
  standard queue and sends `--messages` messages (ten a call);
- `--receivers` clients, each its own HTTP connection pool, receive at once
  (ten a call, a visibility timeout of 300 s, no long poll) until the queue
  gives nothing, and never delete;
- prints how many messages were received, how many distinct ones, and how
  many came to two receivers, with their `ApproximateReceiveCount`.

With a 300 s visibility timeout and a run of seconds, SQS's answer is no
message twice. moto 5.2's `ReceiveMessage` walks the queue's messages and
marks each received without a lock (moto/sqs/models.py, `receive_message`),
in one of its server's request threads each, so two requests that walk the
queue at once can both take the same visible message.

    .venv/bin/python -m bench.studies.moto_receive_race --messages 2000 --receivers 8
"""

from __future__ import annotations

import argparse
import asyncio
import collections
from typing import Any

from aiobotocore.session import get_session
from tests.moto_server import KEY, REGION, start_server

VISIBILITY = 300


async def receive_all(client: Any, url: str, seen: list[tuple[str, str]]) -> None:
    """Receive until an answer is empty; every message id with its receive count."""
    while True:
        answer = await client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=VISIBILITY,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        messages = answer.get("Messages", [])
        if not messages:
            return
        for message in messages:
            count = message.get("Attributes", {}).get("ApproximateReceiveCount", "?")
            seen.append((message["MessageId"], count))


async def one_run(port: int, messages: int, receivers: int) -> None:
    session = get_session()
    args: dict[str, Any] = {
        "region_name": REGION,
        "endpoint_url": f"http://127.0.0.1:{port}",
        "aws_access_key_id": KEY,
        "aws_secret_access_key": KEY,
    }
    async with session.create_client("sqs", **args) as setup:
        url = (await setup.create_queue(QueueName="race"))["QueueUrl"]
        for start in range(0, messages, 10):
            entries = [
                {"Id": str(i), "MessageBody": f"m{start + i}"}
                for i in range(min(10, messages - start))
            ]
            await setup.send_message_batch(QueueUrl=url, Entries=entries)
    seen: list[tuple[str, str]] = []
    clients = [session.create_client("sqs", **args) for _ in range(receivers)]
    opened = [await c.__aenter__() for c in clients]
    try:
        await asyncio.gather(*(receive_all(c, url, seen) for c in opened))
    finally:
        for c in clients:
            await c.__aexit__(None, None, None)
    times = collections.Counter(message_id for message_id, _ in seen)
    twice = {m: n for m, n in times.items() if n > 1}
    counts = sorted({count for message_id, count in seen if message_id in twice})
    print(
        f"sent {messages}; received {len(seen)} times, {len(times)} distinct; "
        f"{len(twice)} handed to more than one receiver within one {VISIBILITY} s visibility "
        f"timeout (their receive counts: {', '.join(counts) or '-'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--receivers", type=int, default=8)
    parser.add_argument(
        "--atomic",
        action="store_true",
        help="serve moto as the tests do, its message calls made atomic (tests/moto_atomic.py)",
    )
    args = parser.parse_args()
    server, port = start_server(atomic=args.atomic)
    try:
        asyncio.run(one_run(port, args.messages, args.receivers))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
