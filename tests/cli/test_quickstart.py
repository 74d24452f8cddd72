# SPDX-License-Identifier: MIT
"""The quickstart demo (`make demo`) runs from any folder, not only the project root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .harness import PATIENCE, ROOT, clean_env


def test_the_quickstart_runs_from_another_folder_and_drains_what_it_dispatched(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart" / "run.py")],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "dispatched 300 jobs" in output
    assert "the worker exited with 1" in output, "the demo's declined cards fail on purpose"
    assert "Traceback" not in output
