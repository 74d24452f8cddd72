# SPDX-License-Identifier: MIT
"""Each database's queue and its cache and lock store read their options through one object.

Read in two places, the options drifted (the stores answered a misspelt
option with a bare `ValueError`, or handed it to the server's client);
these tests hold both sides of each database to the same reading.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rainier_queue.cache.mysql import MySQLCache
from rainier_queue.cache.postgres import PostgresCache
from rainier_queue.cache.sqlite import SQLiteCache
from rainier_queue.drivers import DriverContext, open_queue
from rainier_queue.drivers.database.mysql.settings import MySQLSettings
from rainier_queue.drivers.database.postgres.settings import PostgresSettings
from rainier_queue.drivers.database.sqlite.settings import SQLiteSettings
from rainier_queue.errors import ConfigurationError, UnknownOption

PG = "postgresql://postgres@127.0.0.1:5432/test"
MY = "mysql://root@127.0.0.1:3306/test"


def _urls(tmp: Path) -> dict[str, str]:
    return {"sqlite": f"sqlite:///{tmp / 'jobs.db'}", "postgres": PG, "mysql": MY}


CACHES: dict[str, Callable[[str], Any]] = {
    "sqlite": SQLiteCache.from_url,
    "postgres": PostgresCache.from_url,
    "mysql": MySQLCache.from_url,
}


@pytest.mark.parametrize("database", ["sqlite", "postgres", "mysql"])
def test_a_misspelt_option_is_refused_with_a_suggestion_by_the_queue_and_the_store_alike(
    database: str, tmp_path: Path
) -> None:
    url = _urls(tmp_path)[database] + "?prefx=app_"

    with pytest.raises(UnknownOption, match="prefix") as by_queue:
        open_queue(url, {}, DriverContext())
    with pytest.raises(UnknownOption, match="prefix") as by_store:
        CACHES[database](url)

    assert "Did you mean `prefix`" in str(by_queue.value)
    assert "Did you mean `prefix`" in str(by_store.value)


@pytest.mark.parametrize("database", ["postgres", "mysql"])
def test_a_pool_size_that_is_not_a_number_is_a_configuration_error_on_both_sides(
    database: str, tmp_path: Path
) -> None:
    url = _urls(tmp_path)[database] + "?pool_max=lots"

    with pytest.raises(ConfigurationError, match="`pool_max` must be a whole number"):
        open_queue(url, {}, DriverContext())
    with pytest.raises(ConfigurationError, match="`pool_max` must be a whole number"):
        CACHES[database](url)


@pytest.mark.parametrize("database", ["postgres", "mysql"])
@pytest.mark.parametrize("size", [3.7, 3.0, True])
def test_a_pool_size_from_a_config_table_must_be_a_whole_number_on_every_database(
    database: str, size: object, tmp_path: Path
) -> None:
    # TOML gives a real number or a boolean as itself; MySQL's own parser once
    # read 3.7 as a pool of 3 where PostgreSQL's refused it.
    with pytest.raises(ConfigurationError, match="`pool_max` must be a whole number"):
        open_queue(_urls(tmp_path)[database], {"pool_max": size}, DriverContext())


def test_the_settings_objects_give_back_only_the_extra_options_asked_for(tmp_path: Path) -> None:
    sqlite, own = SQLiteSettings.read(
        f"sqlite:///{tmp_path / 'j.db'}?prefix=app_&lease=5s",
        {"busy_timeout": "2s"},
        who="a test",
        extra=frozenset({"lease"}),
    )
    assert (sqlite.prefix, dict(own)) == ("app_", {"lease": "5s"})
    assert sqlite.busy_timeout is not None
    assert sqlite.busy_timeout.total_seconds() == 2

    postgres, own = PostgresSettings.read(
        PG + "?pool_min=2&pool_max=4&schema=jobs", who="a test", extra=frozenset({"migrate"})
    )
    assert (postgres.pool.min_size, postgres.pool.max_size, postgres.schema) == (2, 4, "jobs")
    assert own == {}

    mysql, own = MySQLSettings.read(
        MY + "?pool_max=3&migrate=false", who="a test", extra=frozenset({"migrate"})
    )
    assert (mysql.pool_max, mysql.url, dict(own)) == (3, MY, {"migrate": "false"})
