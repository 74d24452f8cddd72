# SPDX-License-Identifier: MIT
"""`python -m rainier_queue`: the `rainier-queue` command, for when the script is not on PATH.

Worker supervisors and tests start the CLI this way, with the interpreter
they already know, rather than trusting whichever `rainier-queue` is first
on PATH.
"""

from __future__ import annotations

from .cli.app import main

if __name__ == "__main__":
    main(prog_name="rainier-queue")
