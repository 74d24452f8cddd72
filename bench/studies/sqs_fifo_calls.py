# SPDX-License-Identifier: MIT
"""What a FIFO queue's delay queue and ordering keys cost in SQS requests per job.

Why it is asked: SQS bills per request, and a FIFO connection now sends a
delayed job without a key through a standard delay queue (a send there, and
a receive, a send and a delete to move it, shared by ten), and keeps an
ordering key's jobs in one message group (a receive may bring several of a
key, which wait in the worker). This counts the driver's own requests
(`SQSQueue.api_calls`) for `--jobs` jobs of each kind on one FIFO queue,
pushed with `push_many` and drained by one process reserving ten at a time
and acknowledging in batches, against a private moto server:

- `now`: jobs due at once, each its own group (the baseline);
- `delayed`: the same jobs pushed with a 1 s delay (through the delay queue);
- `keyed`: the same jobs spread over `--keys` ordering keys.

The drain's idle polls count too (a reserve that finds nothing is a
request), so the figure is an upper bound for a busy worker.

    .venv/bin/python -m bench.studies.sqs_fifo_calls --jobs 500 --keys 20
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from datetime import timedelta

from tests.moto_server import KEY, REGION, start_server

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.sqs import SQSQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.job import ORDERING_KEY


def jobs(kind: str, count: int, keys: int) -> list[QueuedJob]:
    out = []
    for n in range(count):
        headers = {ORDERING_KEY: f"key-{n % keys}"} if kind == "keyed" else None
        delay = timedelta(seconds=1) if kind == "delayed" else None
        out.append(QueuedJob.create("noop", {"n": n}, delay=delay, headers=headers))
    return out


async def one_kind(port: int, kind: str, count: int, keys: int) -> tuple[float, float]:
    """Requests per job to push, and to drain."""
    prefix = f"c{uuid.uuid4().hex[:8]}-"
    url = f"sqs://{KEY}:{KEY}@127.0.0.1:{port}/?region={REGION}&tls=false&prefix={prefix}"
    queue = open_queue(url + "&fifo=true&wait=1s")
    assert isinstance(queue, SQSQueue)
    try:
        await queue.provision(["default"])
        start = queue.api_calls
        await queue.push_many(jobs(kind, count, keys))
        pushed = queue.api_calls
        done = 0
        while done < count:
            got = await queue.reserve("default", limit=10)
            if not got:
                await queue.wait_for_work(["default"], timedelta(seconds=1))
                continue
            results = await queue.acknowledge_many(got)
            assert all(r is None for r in results), results
            done += len(got)
        drained = queue.api_calls
        return (pushed - start) / count, (drained - pushed) / count
    finally:
        await queue.aclose()


async def main(count: int, keys: int) -> None:
    server, port = start_server()
    try:
        print(f"{count} jobs on one FIFO queue, one process draining ten at a time")
        print(f"{'kind':<8} {'push/job':>9} {'drain/job':>10} {'total/job':>10}")
        for kind in ("now", "delayed", "keyed"):
            push, drain = await one_kind(port, kind, count, keys)
            print(f"{kind:<8} {push:>9.3f} {drain:>10.3f} {push + drain:>10.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--keys", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.keys))
