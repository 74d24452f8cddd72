# SPDX-License-Identifier: MIT
"""Does a NATS server SIGKILLed soon after answering acknowledgements forget them?

Why it is asked: the fault test that SIGKILLs a NATS 2.9.10 server under
busy workers saw jobs run twice whose acknowledgements the server had
answered (the driver acknowledges with a request, so an answer means the
server took the ack). A clean stop repeats nothing. This isolates the
server from the driver and the worker:

- starts a private nats-server (`tests.nats_server.NATSServer`) with a file
  store, makes a work-queue stream and one durable pull consumer with
  explicit acks, as the driver provisions them;
- publishes `--messages` messages, fetches them all and acknowledges every
  one but the first with a request that waits for the server's answer (the
  first stays unacknowledged, so every other ack removes a message from the
  middle of the stream, as acks from concurrent workers do);
- waits `--wait` seconds, SIGKILLs the server, starts it again on the same
  store, and prints how many messages the stream holds and what the
  consumer remembers.

A stream that holds 1 message afterwards kept every acknowledgement; one
that holds `--messages` forgot them all.

    .venv/bin/python -m bench.studies.nats_crash_acks --wait 0 2 4 6 10
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from tests.nats_server import NATSServer


async def one_run(messages: int, wait: float) -> tuple[int, int]:
    """(messages left in the stream, messages the consumer holds as acknowledged-pending)."""
    server = NATSServer(Path(tempfile.mkdtemp(prefix="rq-nats-crash-")))
    server.start()
    url = f"nats://127.0.0.1:{server.port}"
    try:
        client = await nats.connect(url)
        js = client.jetstream()
        await js.add_stream(
            StreamConfig(
                name="S",
                subjects=["s.>"],
                storage=StorageType.FILE,
                retention=RetentionPolicy.WORK_QUEUE,
            )
        )
        await js.add_consumer(
            "S", ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, ack_wait=60)
        )
        for i in range(messages):
            await js.publish("s.x", str(i).encode())
        sub = await js.pull_subscribe("s.x", durable="C", stream="S")
        seen = 0
        while seen < messages:
            for msg in await sub.fetch(50, timeout=5):
                seen += 1
                if msg.metadata.sequence.stream != 1:
                    await msg.ack_sync()
        await asyncio.sleep(wait)
        server.crash()
        await client.close()
        server.start()
        client = await nats.connect(url)
        js = client.jetstream()
        stream = await js.stream_info("S")
        consumer = await js.consumer_info("S", "C")
        await client.close()
        return stream.state.messages, consumer.num_ack_pending
    finally:
        server.crash()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--wait", type=float, nargs="+", default=[0.0, 2.0, 4.0, 6.0, 10.0])
    args = parser.parse_args()
    print(f"{args.messages} messages, all but the first acknowledged, then a SIGKILL")
    print("wait before the kill | messages left in the stream | consumer's ack-pending")
    for wait in args.wait:
        left, pending = await one_run(args.messages, wait)
        print(f"{wait:>20.1f} | {left:>27} | {pending:>21}")


if __name__ == "__main__":
    asyncio.run(main())
