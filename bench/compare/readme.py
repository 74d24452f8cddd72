# SPDX-License-Identifier: MIT
"""Rewrite the README's benchmark block from the last bench.compare run, without running it again.

The README's numbers must come from the tool, never from a hand edit; but a
full run takes minutes, so the block can also be rewritten afterwards from
bench/results/latest.json (the whole last run: table, date, machine, exact
command, chart):

    .venv/bin/python -m bench.compare.readme                 # README.md
    .venv/bin/python -m bench.compare.readme --readme /tmp/README.md

Only the text between `<!-- bench:start -->` and `<!-- bench:end -->` is
replaced; a README without exactly one pair of markers is left untouched
and the command fails.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .report import write_readme
from .run import LATEST, ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--result", type=Path, default=LATEST, help="a bench.compare latest.json")
    args = parser.parse_args()
    result = json.loads(args.result.read_text())
    try:
        write_readme(args.readme, result, result.get("chart"))
    except ValueError as exc:
        raise SystemExit(f"{args.readme}: {exc}") from exc
    print(f"rewrote the bench block of {args.readme} from {args.result}")


if __name__ == "__main__":
    main()
