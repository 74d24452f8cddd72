# SPDX-License-Identifier: MIT
"""The supervisor: restarts crashed children, leaves finished ones, passes signals on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from rainier_queue.worker import Supervisor

QUICK = timedelta(milliseconds=10)

CRASHES_FIRST = """
import sys
from pathlib import Path
log = Path(sys.argv[1])
with log.open("a") as f:
    f.write("run\\n")
sys.exit(3 if len(log.read_text().splitlines()) == 1 else 0)
"""

FINISHES = """
import sys
from pathlib import Path
with Path(sys.argv[1]).open("a") as f:
    f.write("run\\n")
"""

WAITS_FOR_SIGTERM = """
import os, signal, sys, time
from pathlib import Path
log = Path(sys.argv[1])
stubborn = sys.argv[2] == "stubborn"

def on_term(signum, frame):
    with log.open("a") as f:
        f.write("term\\n")
    if not stubborn:
        sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
with log.open("a") as f:
    f.write("ready\\n")
while True:
    time.sleep(0.01)
"""

SUPERVISE = """
import sys
from datetime import timedelta
from rainier_queue.worker import Supervisor
child, log, mode = sys.argv[1:4]
command = [sys.executable, "-c", child, log, mode]
sys.exit(Supervisor(command, 2, restart_backoff=timedelta(milliseconds=10)).run())
"""


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for(path: Path, line: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while lines(path).count(line) < count:
        assert time.monotonic() < deadline, f"expected {count} x {line!r} in {lines(path)}"
        time.sleep(0.01)


def test_a_child_that_crashes_is_restarted(tmp_path: Path) -> None:
    log = tmp_path / "runs"
    supervisor = Supervisor(
        [sys.executable, "-c", CRASHES_FIRST, str(log)], 1, restart_backoff=QUICK
    )

    assert supervisor.run() == 0
    assert lines(log) == ["run", "run"]


def test_children_that_exit_cleanly_are_not_restarted(tmp_path: Path) -> None:
    log = tmp_path / "runs"

    assert Supervisor([sys.executable, "-c", FINISHES, str(log)], 2).run() == 0
    assert lines(log) == ["run", "run"]


def test_a_child_whose_exit_code_says_it_finished_stays_down_and_its_code_is_reported(
    tmp_path: Path,
) -> None:
    log = tmp_path / "runs"
    command = [sys.executable, "-c", CRASHES_FIRST, str(log)]

    code = Supervisor(command, 1, restart_backoff=QUICK, finished_codes=(0, 3)).run()

    assert code == 3
    assert lines(log) == ["run"], "exit 3 was declared finished, so no restart"


def test_the_supervisor_refuses_zero_processes_and_an_empty_command() -> None:
    with pytest.raises(ValueError, match="at least one process"):
        Supervisor([sys.executable], 0)
    with pytest.raises(ValueError, match="a command"):
        Supervisor([], 1)


def supervise(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "signals"
    process = subprocess.Popen(
        [sys.executable, "-c", SUPERVISE, WAITS_FOR_SIGTERM, str(log), mode],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    wait_for(log, "ready", 2)
    return process, log


def test_a_sigterm_is_passed_on_to_every_child_and_a_clean_stop_exits_zero(
    tmp_path: Path,
) -> None:
    process, log = supervise(tmp_path, "obliging")

    process.send_signal(signal.SIGTERM)

    assert process.wait(10) == 0
    assert lines(log).count("term") == 2
    assert lines(log).count("ready") == 2, "a child stopped by the signal is not restarted"


def test_a_second_signal_kills_children_and_the_exit_code_says_so(tmp_path: Path) -> None:
    process, log = supervise(tmp_path, "stubborn")

    process.send_signal(signal.SIGTERM)
    wait_for(log, "term", 2)
    process.send_signal(signal.SIGTERM)

    assert process.wait(10) == 128 + signal.SIGKILL
