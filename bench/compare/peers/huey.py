# SPDX-License-Identifier: MIT
"""Huey adapter: `RedisHuey`, P `huey_consumer <huey> -k thread -w C` processes.

Huey has no bulk enqueue: the task is called once per job.
"""

from __future__ import annotations

import os
import time

from huey import RedisHuey

from ._common import REDIS_URL, TAG_ENV, Adapter, bin_of, main
from ._sync import delete_matching, incr_counter

NAME = f"rqcmp-huey-{os.environ.get(TAG_ENV, 'none')}"

huey = RedisHuey(NAME, url=REDIS_URL, results=False)


@huey.task(name="compare_incr")
def compare_incr(n: int) -> None:
    incr_counter()


class HueyAdapter(Adapter):
    backend = "redis"

    def enqueue(self) -> float:
        started = time.perf_counter()
        for n in range(self.jobs):
            compare_incr(n)
        return time.perf_counter() - started

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("huey_consumer"),
            "bench.compare.peers.huey.huey",
            "--worker-type",
            "thread",
            "--workers",
            str(self.concurrency),
            "--quiet",
        ]
        return [command] * self.processes

    def teardown(self) -> None:
        delete_matching(f"*{NAME.replace('-', '')}*")  # huey drops the dashes


if __name__ == "__main__":
    main(HueyAdapter)
