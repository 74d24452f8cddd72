# SPDX-License-Identifier: MIT
"""What a worker process loads at start: every worker pays it, so it stays small."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from rainier_queue.cli.app import main
try:
    main(["--app", "tests.cli.sample_jobs:registry", "--url", "memory://", "--quiet",
          "work", "--stop-when-empty"])
except SystemExit as exit:
    code = exit.code
print(sorted(name for name in sys.modules if name == "rich" or name.startswith("rich.")))
print(code)
"""


def test_a_quiet_worker_without_a_terminal_never_loads_rich() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )

    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "0", done.stderr
    assert lines[-2] == "[]", f"rich was loaded: {lines[-2]}"
