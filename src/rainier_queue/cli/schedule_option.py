# SPDX-License-Identifier: MIT
"""`--schedule`, the option `work --with-scheduler` and `schedule` share, apart from the scheduler.

It lives in a module of its own so that `work` can offer it without
importing `schedule`, which loads the scheduler, the cron parser and the
time zones: a worker that schedules nothing starts without them.
"""

from __future__ import annotations

import click

SCHEDULE_OPTION = click.option(
    "--schedule",
    "schedule_spec",
    metavar="MODULE:ATTR",
    help="A Schedule in code (or a function returning one), beside the config's [schedules].",
)

__all__ = ["SCHEDULE_OPTION"]
