# SPDX-License-Identifier: MIT
"""The quickstart: a burst of jobs through a real worker process on SQLite, no server.

    .venv/bin/python examples/quickstart/run.py      (or: make demo)

It shows what the library is for, end to end, in about five seconds:

1. dispatch 300 jobs from this process to `sqlite:///examples/quickstart/demo.db`
   (a fresh file every run), through the same API a web application uses;
2. start `rainier-queue work --stop-when-empty` as a separate process, as a
   deployment would, and let you watch it drain the backlog with a progress
   bar: webhooks that fail and recover, cards that are declined for good;
3. read back what happened: the worker's own summary, and the failed table
   with the errors an operator would see.

Afterwards the file stays, so you can look around with the commands it
prints at the end.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from examples.quickstart.jobs import (  # noqa: E402 - needs ROOT on the path first
    DECLINED,
    QUEUES,
    ChargeCard,
    ResizeImage,
    SendWebhook,
    registry,
)

from rainier_queue import FailedJobStore, Job, QueueConfig  # noqa: E402

DB = ROOT / "examples" / "quickstart" / "demo.db"
URL = f"sqlite:///{DB.relative_to(ROOT)}"
APP = "examples.quickstart.jobs:registry"


def burst() -> list[Job]:
    """300 jobs: 60 charges (6 declined), 90 webhooks (60 flaky at first), 150 resizes."""
    jobs: list[Job] = []
    for n in range(60):
        card = DECLINED if n % 10 == 7 else "4242424242424242"
        jobs.append(ChargeCard(order_id=1000 + n, amount_cents=1999 + n * 100, card=card))
    for n in range(90):
        url = f"https://customer-{n % 9}.example/hooks"
        jobs.append(SendWebhook(url=url, event="order.paid", flaky_attempts=n % 3))
    for n in range(150):
        jobs.append(ResizeImage(path=f"uploads/photo-{n:03}.jpg", width=320 + n))
    return jobs


async def dispatch() -> Counter[str]:
    manager = QueueConfig.from_url(URL).build(registry)
    async with manager:
        jobs = burst()
        await manager.dispatch_many(jobs)
    return Counter(type(job).name for job in jobs)


async def failed_jobs() -> list[tuple[str, str]]:
    manager = QueueConfig.from_url(URL).build(registry)
    async with manager:
        store = manager.queue
        assert isinstance(store, FailedJobStore)
        return [(f.job.name, f.error.splitlines()[0]) for f in await store.failed_jobs()]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rainier_queue", "--app", APP, "--url", URL, *args]


def main() -> int:
    # The URL is relative to the project folder, for the commands printed at the
    # end; this process and the worker both work from there, wherever it was run.
    os.chdir(ROOT)
    for leftover in DB.parent.glob(DB.name + "*"):
        leftover.unlink()
    counts = asyncio.run(dispatch())
    print(f"dispatched {sum(counts.values())} jobs to {URL}: ", end="")
    print(", ".join(f"{n} {name}" for name, n in counts.items()))
    print(f"starting a worker on {QUEUES} (first queue first), 8 jobs at a time:\n")

    worker = cli("--quiet", "work", "--queue", QUEUES, "--stop-when-empty")
    worker += ["--concurrency", "8", "--progress"]
    code = subprocess.run(worker, cwd=ROOT, check=False).returncode
    if code not in (0, 1):  # 1: some jobs failed, which this demo arranges on purpose
        print(f"the worker exited with {code}; see its messages above")
        return code

    failed = asyncio.run(failed_jobs())
    print(f"\nthe worker exited with {code}: 1 means some jobs ended in the failed store.")
    print(
        "send-webhook jobs that got a 503 were retried after their backoff and succeeded; "
        f"{len(failed)} charge-card jobs with a declined card used their 3 tries and failed:\n"
    )
    subprocess.run(cli("failed", "--limit", "3"), cwd=ROOT, check=False)
    print("\nlook around yourself, from the project folder:")
    for args in ("size", "failed", "doctor", "retry --all"):
        print(f"  .venv/bin/python -m rainier_queue --app {APP} --url {URL} {args}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
