# SPDX-License-Identifier: MIT
"""What encrypting payloads costs per job: dispatch and worker CPU, with and without a key ring.

A connection with `encryption` seals every payload at dispatch (AES-256-GCM
over the payload's JSON text, a random nonce, base64) and opens it in the
worker before the job is built (docs/encryption.md). This dispatches
`--jobs` no-op jobs through a `QueueManager` and drains them with an
in-process worker, on the same URL with and without a key ring, rounds
alternating between the two so a machine that slows down mid-run slows
both, and prints the process's CPU microseconds per job (`time.process_time`)
for each side, the median of `--rounds` rounds, and the difference.

    .venv/bin/python -m bench.studies.encryption_cost --url memory:// --url sqlite
    .venv/bin/python -m bench.studies.encryption_cost --payload-bytes 1024

`--url sqlite` is a fresh temporary file per round; a server URL should
carry a `prefix` of its own, and is cleared before each round.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rainier_queue import Job, JobContext, JobRegistry, QueueManager, Worker, WorkerOptions
from rainier_queue.connections import open_queue

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()


class Sized(Job):
    name = "bench-sized"
    tries = 1
    n: int
    text: str = ""

    async def handle(self, ctx: JobContext) -> None:
        return None


REGISTRY = JobRegistry([Sized])


@dataclass
class Round:
    dispatch_us: float
    work_us: float


def _url(given: str, folder: Path, n: int) -> str:
    return f"sqlite:///{folder / f'round-{n}.db'}" if given == "sqlite" else given


async def one_round(url: str, jobs: int, text: str, *, encrypted: bool) -> Round:
    options = {"encryption": {"keys": {"k1": KEY}}} if encrypted else {}
    queue = open_queue(url, options)
    try:
        await queue.size("default")  # connected; tables made
        await queue.clear("default")
        manager = QueueManager(queue, registry=REGISTRY)
        batch = [Sized(n=n, text=text) for n in range(jobs)]
        started = time.process_time()
        for i in range(0, jobs, 500):
            await manager.dispatch_many(batch[i : i + 500])
        dispatched = time.process_time() - started
        worker = Worker(
            queue, REGISTRY, WorkerOptions(concurrency=16, stop_when_empty=True, drain_wait=None)
        )
        started = time.process_time()
        stats = await worker.run()
        worked = time.process_time() - started
        assert stats.processed == jobs, stats
        return Round(dispatched / jobs * 1e6, worked / jobs * 1e6)
    finally:
        await queue.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", action="append", help="memory://, sqlite, or a server URL")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--payload-bytes", type=int, default=0, help="text added to each payload")
    args = parser.parse_args()
    text = "x" * args.payload_bytes
    with tempfile.TemporaryDirectory() as tmp:
        for given in args.url or ["memory://", "sqlite"]:
            rounds: dict[bool, list[Round]] = {False: [], True: []}
            for n in range(args.rounds):
                for encrypted in (False, True) if n % 2 == 0 else (True, False):
                    url = _url(given, Path(tmp), 2 * n + encrypted)
                    rounds[encrypted].append(
                        await one_round(url, args.jobs, text, encrypted=encrypted)
                    )
            print(f"{given}, {args.jobs} jobs, payload text {args.payload_bytes} bytes:")
            for side in ("dispatch_us", "work_us"):
                plain = statistics.median(getattr(r, side) for r in rounds[False])
                sealed = statistics.median(getattr(r, side) for r in rounds[True])
                print(
                    f"  {side[:-3]:8} CPU per job: plain {plain:7.1f} µs, encrypted "
                    f"{sealed:7.1f} µs, +{sealed - plain:5.1f} µs ({sealed / plain - 1:+.0%})"
                )


if __name__ == "__main__":
    asyncio.run(main())
