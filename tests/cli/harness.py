# SPDX-License-Identifier: MIT
"""Run `python -m rainier_queue` in a subprocess, as a user would, and read what it said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.cli.sample_jobs:registry"
PATIENCE = 120
"""Seconds a command may take before the test gives up on it (not a timing assertion)."""


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any RAINIER_QUEUE_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAINIER_QUEUE_")}
    env.update(extra)
    return env


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def json(self) -> Any:
        return json.loads(self.stdout)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rainier_queue", *args]


def run(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> Result:
    """Run the CLI with `args` to its end."""
    done = subprocess.run(
        command(*args),
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the CLI with `args` and leave it running."""
    return subprocess.Popen(
        command(*args),
        cwd=ROOT,
        env=env if env is not None else clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Cli:
    """The CLI pointed at one SQLite file with the sample jobs."""

    def __init__(self, url: str, app: str = APP) -> None:
        self.url = url
        self.app = app

    def args(self, *args: str) -> list[str]:
        return ["--app", self.app, "--url", self.url, *args]

    def __call__(self, *args: str) -> Result:
        return run(*self.args(*args))

    def start(self, *args: str) -> subprocess.Popen[str]:
        return start(*self.args(*args))

    def sizes(self, *queues: str) -> dict[str, int]:
        result = self("size", "--json", *queues)
        assert result.code == 0, result.output
        sizes: dict[str, int] = result.json()
        return sizes

    def failed(self) -> list[dict[str, Any]]:
        result = self("failed", "--json")
        assert result.code == 0, result.output
        failed: list[dict[str, Any]] = result.json()
        return failed


def no_traceback(result: Result) -> bool:
    return "Traceback" not in result.output
