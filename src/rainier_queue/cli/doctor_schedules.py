# SPDX-License-Identifier: MIT
"""`doctor`'s look at the schedules: the same checks a scheduler makes at start-up.

A schedule that cannot run fails only when a scheduler starts, which may be
a deploy later and on another machine; `doctor` is where a person looks
before that. So it reads the schedules exactly as `schedule work` would (the
Schedule in code named in the config or by `--schedule`, and the
`[schedules]` tables), lists every problem found, and says where the
per-tick claims would be kept, since a store other processes do not share
lets every scheduler enqueue every tick.

It returns findings rather than printing them, so `doctor` decides how they
look; and it loads the scheduler only when there is a schedule to check.
"""

from __future__ import annotations

from typing import Literal

from .loading import Loaded
from .output import Problem

Grade = Literal["ok", "warn", "problem"]


async def schedule_findings(
    loaded: Loaded, spec: str | None, connection: str | None
) -> tuple[str, list[tuple[Grade, str]]]:
    """A heading for the section, and what was found, each with its grade."""
    if spec is None and loaded.schedule is None and not loaded.schedules:
        return "schedules: none declared", [
            (
                "ok",
                'no schedules: none in code is named (`schedule = "module:attribute"` in the '
                "config, or --schedule) and the config has no [schedules] tables",
            )
        ]
    from .schedule import claim_store, gather_schedules

    gathered = await gather_schedules(loaded, spec)
    heading = f"schedules: from {gathered.code or 'no code'} and {gathered.config}"
    if gathered.problems:
        return heading, [("problem", problem) for problem in gathered.problems]
    entries = gathered.schedule.check(loaded.registry)
    names = ", ".join(f"`{entry.name}`" for entry in entries)
    found: list[tuple[Grade, str]] = [("ok", f"{len(entries)} schedule(s) can run: {names}")]
    if not entries:
        return heading, found
    locks = loaded.manager.locks
    if locks is not None:
        if locks.is_shared:
            found.append(("ok", f"their claims are kept in the `{locks.cache.name}` lock store"))
        elif loaded.queue(connection).capabilities.shared_between_processes:
            found.append(
                (
                    "problem",
                    f"their claims would be kept in the `{locks.cache.name}` lock store, which "
                    "other processes do not see, so every scheduler process would enqueue "
                    "every tick; set `locks` to the queue's database or Redis",
                )
            )
        return heading, found
    try:
        store = claim_store(loaded, connection)
    except Problem as exc:
        found.append(("problem", exc.message))
        return heading, found
    try:
        where = "the connection's own store" if store.is_shared else "this process's memory"
        found.append(("ok", f"their claims are kept in {where} (`{store.name}`)"))
    finally:
        await store.aclose()
    return heading, found


__all__ = ["Grade", "schedule_findings"]
