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


WEB_AND_TESTS = "From a web view, and in tests"

REQUESTS = """
import threading
from collections import Counter

from myapp.jobs import SendWelcome
from myapp.queueing import queue

def request_thread(first):
    for user_id in range(first, first + 50):
        if user_id % 2:
            queue.dispatch(SendWelcome(user_id=user_id))
        else:  # the same facade, as the README says
            queue.manager.blocking().dispatch(SendWelcome(user_id=user_id))

threads = [threading.Thread(target=request_thread, args=(t * 50,)) for t in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(queue.size("emails"), threading.active_count())
print(sorted(Counter(t.name for t in threading.enumerate()).items()))
"""

VIEWS = """
from myapp.jobs import SendWelcome


def signup_view(queue, user_id):
    queue.dispatch(SendWelcome(user_id=user_id))


async def signup(manager, user_id):
    await manager.dispatch(SendWelcome(user_id=user_id))
"""

ASYNC_TESTS = """
[tool.pytest.ini_options]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
"""


SLOW_CALLBACK = re.compile(r"^Executing .+ took \d+\.\d+ seconds$")
"""`-X dev` turns on asyncio's debug mode, which logs any callback that ran over 0.1 s:
on a loaded machine a scheduler's pause, not a fault of the code under test."""


def complaints(stderr: str) -> list[str]:
    """What `-X dev` printed, less asyncio's slow-callback timings (seen in CI under load)."""
    return [line for line in stderr.splitlines() if not SLOW_CALLBACK.match(line)]


def test_the_readme_web_view_facade_takes_dispatches_from_many_request_threads(
    tmp_path: Path,
) -> None:
    folder = project(tmp_path)
    queueing, _view, _tests = blocks(section(WEB_AND_TESTS), "python")
    (folder / "myapp" / "queueing.py").write_text(queueing, encoding="utf-8")

    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", REQUESTS],
        cwd=folder,
        env=clean_env(PYTHONPATH=str(folder)),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )

    assert (done.returncode, complaints(done.stderr)) == (0, [])
    queued, threads = done.stdout.splitlines()[0].split()
    assert int(queued) == 400
    # The main thread, the facade's loop, and SQLite's connection threads (the queue's
    # and the lock store's): not one per request thread, nor one per dispatch.
    assert int(threads) <= 4, done.stdout


def test_the_readme_tests_run_recorded_jobs_in_a_sync_and_an_async_test(tmp_path: Path) -> None:
    folder = project(tmp_path)
    _queueing, _view, tests = blocks(section(WEB_AND_TESTS), "python")
    (folder / "myapp" / "views.py").write_text(VIEWS, encoding="utf-8")
    (folder / "test_signup.py").write_text(tests, encoding="utf-8")
    with (folder / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write(ASYNC_TESTS)  # what the section says an async test needs

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=folder,
        env=clean_env(PYTHONPATH=str(folder)),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
