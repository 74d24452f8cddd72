# SPDX-License-Identifier: MIT
"""Settings no wait can fix are configuration errors, not outages.

A database that does not exist, an unknown role, a wrong password or a
directory the process may not write to will be just as wrong in a minute.
Labelled "the broker did not answer", they sent users looking at the
server, and a worker sat through them for minutes as if it were a restart.
Each must stop the command at once (exit 2) and say what to change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..services import require_port
from .harness import APP, no_traceback, run

CASES = {
    "a postgres database that does not exist": (
        ("postgres", 5432),
        "postgresql://127.0.0.1:5432/rainier_no_such_db",
        "createdb rainier_no_such_db",
    ),
    "a postgres role that does not exist": (
        ("postgres", 5432),
        "postgresql://rainier_no_such_role@127.0.0.1:5432/test",
        "createuser rainier_no_such_role",
    ),
    "a mysql database that does not exist": (
        ("mariadb", 3306),
        "mysql://root@127.0.0.1:3306/rainier_no_such_db",
        "create the database",
    ),
    "a mysql user that does not exist": (
        ("mariadb", 3306),
        "mysql://rainier_nobody:wrong@127.0.0.1:3306/test",
        "fix the user name and password",
    ),
    "a wrong redis password": (
        ("redis", 6379),
        "redis://rainier_nobody:wrong@127.0.0.1:6379/0",
        "fix the user name and password",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", ["size", "work"])
def test_a_setting_no_wait_can_fix_stops_the_command_at_once_saying_what_to_change(
    case: str, command: str
) -> None:
    (service, port), url, fix = CASES[case]
    require_port(service, port)

    result = run("--app", APP, "--url", url, command)

    assert result.code == 2, result.output
    assert fix in result.stderr
    assert "did not answer" not in result.output
    assert "wrong@" not in result.output, "the password is never shown"
    assert no_traceback(result)


def _read_only_folder(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes through file modes; sysfs refuses new files even to root
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def test_a_sqlite_file_in_a_directory_it_may_not_write_to_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    folder = _read_only_folder(tmp_path)

    result = run("--app", APP, "--url", f"sqlite:///{folder / 'jobs.db'}", "size")

    assert result.code == 2, result.output
    assert "may not write to its directory" in result.stderr
    assert "did not answer" not in result.output
    assert no_traceback(result)


def test_a_sqlite_url_naming_a_directory_says_to_name_a_file(tmp_path: Path) -> None:
    result = run("--app", APP, "--url", f"sqlite:///{tmp_path}", "size")

    assert result.code == 2, result.output
    assert "names a directory" in result.stderr
