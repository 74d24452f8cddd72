# SPDX-License-Identifier: MIT
"""The README's example, run as written: a new user copies it before reading anything else.

The section "What it looks like" is read from README.md itself: its Python
block becomes `myapp/jobs.py`, its TOML block `pyproject.toml`, and each
line of its shell block is run in that folder as a user would type it. A
snippet that stops running as written fails here, not for the next user.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from .harness import PATIENCE, ROOT, Result, clean_env, command, run

README = ROOT / "README.md"


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def shell_lines(text: str) -> list[list[str]]:
    """Each command of the shell block, as arguments after `rainier-queue`, comments dropped."""
    [block] = blocks(text, "sh")
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    commands = [shlex.split(line) for line in lines if line]
    assert all(words[0] == "rainier-queue" for words in commands), commands
    return [words[1:] for words in commands]


def project(tmp_path: Path) -> Path:
    text = section("What it looks like")
    [python] = blocks(text, "python")
    [toml] = blocks(text, "toml")
    package = tmp_path / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "jobs.py").write_text(python, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(toml, encoding="utf-8")
    return tmp_path


def in_folder(folder: Path, *args: str) -> Result:
    return run(*args, cwd=folder, env=clean_env(PYTHONPATH=str(folder)))


def test_the_readme_example_dispatches_passes_doctor_and_is_drained_by_its_worker(
    tmp_path: Path,
) -> None:
    folder = project(tmp_path)
    doctor, forever, drain = shell_lines(section("What it looks like"))
    assert doctor == ["doctor"]
    assert "QueueConfig.load(environ=os.environ)" in (folder / "myapp" / "jobs.py").read_text(
        encoding="utf-8"
    ), "the application reads the same config file as the commands"
    assert "--stop-when-empty" in drain

    dispatched = subprocess.run(
        [sys.executable, "-m", "myapp.jobs"],
        cwd=folder,
        env=clean_env(PYTHONPATH=str(folder)),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert dispatched.returncode == 0, dispatched.stdout + dispatched.stderr

    checked = in_folder(folder, *doctor)
    assert checked.code == 0, checked.output
    assert "no problems found" in checked.stdout
    assert "  warn" not in checked.stdout, "the example's own setup draws no warning"

    drained = in_folder(folder, *drain)
    assert drained.code == 0, drained.output
    assert "succeeded 2, retried 0, failed 0" in drained.stdout
    assert "lock" not in drained.stderr, "the worker has the dispatcher's locks"

    worker = subprocess.Popen(
        command(*forever),
        cwd=folder,
        env=clean_env(PYTHONPATH=str(folder)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        started = worker.stderr.readline()
        assert "working emails, media, default" in started, started
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=PATIENCE)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0
