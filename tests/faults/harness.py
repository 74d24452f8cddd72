# SPDX-License-Identifier: MIT
"""Start real worker processes through the CLI and read the ledger they leave."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.faults.ledger_jobs:registry"


def config(folder: Path, url: str, **options: str) -> Path:
    """A `rainier-queue.toml` with one connection, for workers started with `--config`."""
    lines = ["[connections.main]", f'url = "{url}"', *(f'{k} = "{v}"' for k, v in options.items())]
    path = folder / "rainier-queue.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def worker(config_file: Path, ledger: Path, *args: str) -> subprocess.Popen[bytes]:
    """A `rainier-queue work` process on the config's queue, writing runs to `ledger`."""
    env = {**os.environ, "RAINIER_QUEUE_TEST_LEDGER": str(ledger), "PYTHONPATH": str(ROOT)}
    command = ["--app", APP, "--config", str(config_file), "work", *args]
    log = ledger.parent / f"worker-{len(list(ledger.parent.glob('worker-*.log')))}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rainier_queue", *command],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def output(proc: subprocess.Popen[bytes]) -> str:
    """What a worker started by `worker` printed."""
    log: Path = proc.log  # type: ignore[attr-defined]
    return log.read_text(encoding="utf-8", errors="replace")


def events(ledger: Path) -> list[tuple[str, int, int, int, str]]:
    """(job_id, n, attempt, pid, event) rows, in the order they were written."""
    if not ledger.exists():
        return []
    conn = sqlite3.connect(ledger, timeout=30)
    try:
        return list(conn.execute("SELECT job_id, n, attempt, pid, event FROM runs ORDER BY rowid"))
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def count(ledger: Path, event: str) -> Counter[int]:
    """How many times each job number logged `event`."""
    return Counter(n for _, n, _, _, e in events(ledger) if e == event)
