# SPDX-License-Identifier: MIT
"""What a worker process loads at start: every worker pays it, so it stays small."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from rainier_queue.cli.app import main
try:
    main(["--app", "tests.cli.sample_jobs:registry", "--url", sys.argv[1], "--quiet",
          "work", "--stop-when-empty"])
except SystemExit as exit:
    code = exit.code
print(" ".join(sorted(sys.modules)))
print(code)
"""


def loaded_by_a_quiet_worker(url: str) -> set[str]:
    """The modules a quiet `work --stop-when-empty` on `url` had loaded when it ended."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines[-1:] == ["0"], done.stderr
    return set(lines[-2].split())


def families(modules: set[str], *names: str) -> list[str]:
    return sorted(m for m in modules if m in names or m.startswith(tuple(f"{n}." for n in names)))


def test_a_quiet_worker_without_a_terminal_never_loads_rich() -> None:
    modules = loaded_by_a_quiet_worker("memory://")

    assert families(modules, "rich") == [], "rich was loaded"


def test_a_sqlite_worker_loads_no_other_drivers_client_library(tmp_path: Path) -> None:
    modules = loaded_by_a_quiet_worker(f"sqlite:///{tmp_path / 'jobs.db'}")

    assert "rainier_queue.drivers.database.sqlite" in modules
    assert families(modules, "redis", "psycopg", "psycopg_pool", "aiomysql", "aiokafka") == []


def test_a_worker_that_schedules_nothing_loads_neither_the_scheduler_nor_other_commands() -> None:
    modules = loaded_by_a_quiet_worker("memory://")

    assert families(modules, "rainier_queue.scheduling", "cronsim") == []
    others = ("admin", "dispatch", "doctor", "inspection", "schedule")
    assert families(modules, *(f"rainier_queue.cli.{name}" for name in others)) == []


def test_a_worker_given_its_url_reads_no_config_file_and_loads_no_toml_parser() -> None:
    modules = loaded_by_a_quiet_worker("memory://")

    assert families(modules, "tomllib") == []


COLLECTOR_PROBE = """
import asyncio, gc, sys
from rainier_queue import Job, JobRegistry, QueueConfig
from rainier_queue.cli.app import main

seen = []

class Look(Job):
    name = "look"

    def handle(self, ctx):
        seen.append(gc.isenabled())

registry = JobRegistry([Look])

async def dispatch():
    manager = QueueConfig.from_url(sys.argv[1]).build(registry)
    await manager.dispatch(Look())
    await manager.aclose()

asyncio.run(dispatch())
try:
    main(["--app", "__main__:registry", "--url", sys.argv[1], "--quiet", "work",
          "--stop-when-empty"])
except SystemExit as exit:
    code = exit.code
print(seen, gc.isenabled(), code)
"""


def test_jobs_run_with_the_cycle_collector_on_though_start_up_paused_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR_PROBE, f"sqlite:///{tmp_path / 'jobs.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.stdout.strip().splitlines()[-1:] == ["[True] True 0"], done.stderr
