# SPDX-License-Identifier: MIT
"""What does cancelling a busy quorum-queue consumer cost the jobs on their way to it?

Why: a stopping worker cancels its consumer and gives back, uncounted, what
it was sent and never started; yet jobs with one try were failed unrun by
the next worker, as if a delivery had been counted. The question is where
such a delivery goes: does aiormq drop a `basic.deliver` that arrives
between `basic.cancel` and its `cancel-ok` (or after it), or does the server
take back a job it handed to the consumer and never sent?

This takes no part of rainier-queue: a bare aiormq consumer on a scratch
quorum queue (or classic, `--type classic`) acknowledges each delivery as it
arrives (the way a busy worker frees its window), and after `--after`
deliveries cancels. Every frame the channel reads for the consumer is
counted, before and after the cancel-ok; everything it got is then
acknowledged, the channel closed, and the queue read back: a job with
`x-delivery-count` >= 1 (a classic queue's: marked redelivered) was
counted by the server though the client never had it, and one whose body
it had seen and acknowledged came back all the same (`--acks single`
acknowledges the deliveries held at the cancel one frame each, right
before the close). `--mode settled` first waits for the
consumer's window to fill or to go quiet for 100 ms (what the driver
does, consuming.py); `--publisher` pushes jobs at the queue throughout, so
the window has room and a push can land in the very moment of the cancel
(what the driver cannot close).

    .venv/bin/python -m bench.studies.amqp_cancel_race --cycles 20
    .venv/bin/python -m bench.studies.amqp_cancel_race --cycles 30 --mode settled --acks single
    .venv/bin/python -m bench.studies.amqp_cancel_race --cycles 30 --mode settled
    .venv/bin/python -m bench.studies.amqp_cancel_race --cycles 30 --mode settled --jobs 300 \
        --after 300 --prefetch 1000 --publisher 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from typing import Any

import aiormq
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

URL = "amqp://guest:guest@127.0.0.1:5672/"
QUIET = 0.1
PROPS = spec.Basic.Properties(delivery_mode=2)


async def settle(prefetch: int, unacked: set[int], seen: list[int]) -> None:
    """Wait until the consumer holds `prefetch` unacknowledged deliveries, or none came for
    QUIET seconds (at most 2 s)."""
    loop = asyncio.get_running_loop()
    deadline, last, count = loop.time() + 2, loop.time(), len(seen)
    while len(unacked) < prefetch and loop.time() < deadline:
        await asyncio.sleep(0.005)
        if len(seen) != count:
            count, last = len(seen), loop.time()
        elif loop.time() - last >= QUIET:
            return


async def cycle(conn: Any, args: argparse.Namespace) -> dict[str, int]:
    name = f"rq-study-cancel.{uuid.uuid4().hex[:8]}"
    admin = await conn.channel()
    await admin.queue_declare(name, durable=True, arguments={"x-queue-type": args.type})
    try:
        await asyncio.gather(
            *(
                admin.basic_publish(b"%d" % n, routing_key=name, properties=PROPS)
                for n in range(args.jobs)
            )
        )
        channel = await conn.channel()
        await channel.basic_qos(prefetch_count=args.prefetch)
        seen: list[int] = []
        bodies: set[bytes] = set()
        unacked: set[int] = set()
        frames = {"before_ok": 0, "after_ok": 0}
        cancelled = False
        reader = channel._on_deliver_frame

        async def counting(frame: spec.Basic.Deliver) -> None:
            frames["after_ok" if cancelled else "before_ok"] += 1
            await reader(frame)

        channel._on_deliver_frame = counting
        enough = asyncio.Event()

        async def on_message(message: DeliveredMessage) -> None:
            tag = int(message.delivery_tag or 0)
            seen.append(tag)
            bodies.add(message.body)
            if not enough.is_set():
                await channel.basic_ack(tag)  # the flow: each ack makes room for the next
                if len(seen) >= args.after:
                    enough.set()
            else:
                unacked.add(tag)

        stop_pushing = asyncio.Event()

        async def publisher() -> int:
            sent = 0
            while not stop_pushing.is_set():
                body = b"pushed %d" % sent
                await admin.basic_publish(body, routing_key=name, properties=PROPS)
                sent += 1
                await asyncio.sleep(1 / args.publisher)
            return sent

        pushing = asyncio.ensure_future(publisher()) if args.publisher else None
        ok = await channel.basic_consume(name, on_message)
        await enough.wait()
        if args.mode == "settled":
            await settle(args.prefetch, unacked, seen)
        await channel.basic_cancel(ok.consumer_tag)
        cancelled = True
        await asyncio.sleep(0.3)
        stop_pushing.set()
        pushed = await pushing if pushing is not None else 0
        if args.acks == "multiple" and unacked:  # every delivery below was acknowledged
            await channel.basic_ack(max(unacked), multiple=True)
        else:
            for tag in sorted(unacked):
                await channel.basic_ack(tag)
        await channel.basic_qos(prefetch_count=args.prefetch)  # a round trip: the acks are in
        await channel.close()
        held_at_cancel = len(unacked)
        counted = left = again = 0
        while True:
            got = await admin.basic_get(name, no_ack=True)
            if not isinstance(got.delivery, spec.Basic.GetOk):
                break
            left += 1
            if got.body in bodies:
                again += 1  # acknowledged, and back all the same
            else:  # a classic queue's only mark is `redelivered`
                headers = got.header.properties.headers or {}
                redelivered = getattr(got.delivery, "redelivered", False)
                counted += headers.get("x-delivery-count", 0) >= 1 or redelivered
        return {
            "seen": len(seen),
            "frames_before_cancel_ok": frames["before_ok"],
            "frames_after_cancel_ok": frames["after_ok"],
            "left": left,
            "pushed_meanwhile": pushed,
            "held_at_cancel": held_at_cancel,
            "counted_unseen": counted,
            "acked_but_back": again,
        }
    finally:
        with contextlib.suppress(Exception):
            await admin.queue_delete(name)
        await admin.close()


async def main(args: argparse.Namespace) -> None:
    conn = await aiormq.connect(URL)
    try:
        hit = total = back = 0
        for n in range(args.cycles):
            result = await cycle(conn, args)
            hit += result["counted_unseen"] > 0
            total += result["counted_unseen"]
            back += result["acked_but_back"] > 0
            print(n, result, flush=True)
        print(
            f"{args.type} {args.mode}: {hit} of {args.cycles} cycles had jobs counted unseen, "
            f"{total} jobs in all; {back} cycles had acknowledged jobs come back ({args.acks} acks)"
        )
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--after", type=int, default=300, help="deliveries before the cancel")
    parser.add_argument("--mode", choices=("at-once", "settled"), default="at-once")
    parser.add_argument("--type", choices=("quorum", "classic"), default="quorum")
    parser.add_argument(
        "--acks",
        choices=("single", "multiple"),
        default="multiple",
        help="how the deliveries held at the cancel are acknowledged, just before the close",
    )
    parser.add_argument("--publisher", type=float, default=0, help="pushes a second meanwhile")
    asyncio.run(main(parser.parse_args()))
