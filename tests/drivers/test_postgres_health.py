# SPDX-License-Identifier: MIT
"""What `doctor` makes of a PostgreSQL server's settings, rule by rule, with no server.

Most of these settings can be changed only for the whole server, so the
rules are tested on the function that turns settings into advice; the
PostgreSQL queue's tests read a real server's settings through it.
"""

from __future__ import annotations

import pytest

from rainier_queue.drivers.database.postgres.health import ServerSettings, warnings_for

JOBS = "app_jobs"


def test_a_sound_server_gets_no_warning() -> None:
    assert warnings_for(ServerSettings(jobs_table=JOBS)) == []


def test_autovacuum_off_is_a_warning_that_says_what_to_do() -> None:
    (warning,) = warnings_for(ServerSettings(jobs_table=JOBS, autovacuum="off"))

    assert warning.startswith("autovacuum is off")
    assert "steps over the dead entries" in warning, "it says why it matters"
    assert "autovacuum = on in postgresql.conf" in warning
    assert "VACUUM app_jobs" in warning, "and names the table to vacuum meanwhile"


def test_without_track_counts_autovacuum_is_blind_and_that_is_a_warning() -> None:
    (warning,) = warnings_for(ServerSettings(jobs_table=JOBS, track_counts="off"))

    assert warning.startswith("track_counts is off")
    assert "turn track_counts on" in warning.lower()


@pytest.mark.parametrize("value", ["false", "off", "0", "no", "FALSE", "f"])
def test_a_jobs_table_that_opts_out_of_autovacuum_is_a_warning(value: str) -> None:
    settings = ServerSettings(
        jobs_table=JOBS, table_options=("fillfactor=90", f"autovacuum_enabled={value}")
    )

    (warning,) = warnings_for(settings)

    assert "autovacuum is turned off for app_jobs itself" in warning
    assert "ALTER TABLE app_jobs RESET (autovacuum_enabled)" in warning


@pytest.mark.parametrize("value", ["true", "on", "1", "yes"])
def test_a_jobs_table_that_keeps_autovacuum_on_is_fine(value: str) -> None:
    settings = ServerSettings(jobs_table=JOBS, table_options=(f"autovacuum_enabled={value}",))

    assert warnings_for(settings) == []


def test_each_setting_at_risk_gets_its_own_warning() -> None:
    settings = ServerSettings.from_row(
        JOBS, ("off", "off", "off", "on", ["autovacuum_enabled=false"], True, "10.0.0.5")
    )

    warnings = warnings_for(settings)

    assert [w.split(" ", 1)[0] for w in warnings] == [
        "synchronous_commit",
        "fsync",
        "autovacuum",
        "autovacuum",
    ]
    assert len(warnings[3]) < len(warnings[2]), "the reason is not repeated"


def test_a_jobs_table_with_no_storage_options_reads_as_none() -> None:
    settings = ServerSettings.from_row(JOBS, ("on", "on", "on", "on", None, False, None))

    assert settings.table_options == ()
    assert warnings_for(settings) == []


@pytest.mark.parametrize("address", ["10.0.0.5", "db.internal", "2001:db8::7"])
def test_an_unencrypted_connection_to_another_machine_is_a_warning(address: str) -> None:
    row = ("on", "on", "on", "on", None, False, address)

    (warning,) = warnings_for(ServerSettings.from_row(JOBS, row))

    assert f"server at {address} is not encrypted" in warning
    assert "sslmode=verify-full" in warning


@pytest.mark.parametrize("address", [None, "127.0.0.1", "::1"])
def test_a_plain_connection_on_this_machine_is_fine(address: str | None) -> None:
    row = ("on", "on", "on", "on", None, False, address)  # None: a Unix socket

    assert warnings_for(ServerSettings.from_row(JOBS, row)) == []


def test_tls_with_the_certificate_unchecked_is_a_warning_even_when_encrypted() -> None:
    row = ("on", "on", "on", "on", None, True, "10.0.0.5")
    assert warnings_for(ServerSettings.from_row(JOBS, row)) == []

    (warning,) = warnings_for(ServerSettings.from_row(JOBS, row, unverified=True))

    assert "insecure_skip_verify=true" in warning
