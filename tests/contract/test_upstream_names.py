# SPDX-License-Identifier: MIT
"""The upstream's option names are refused on every driver with an answer that names ours.

A user coming from the upstream writes `retry_after`, `after_commit`,
`block_for`, a pool size, `table` or `connection`; each is refused before
anything connects, beside the URL or in its query, saying what this library
calls it or why it means nothing here (the upstream's own checklist pins
these phrases). The answer depends on the driver: what it takes, how its
idle worker waits, whether it enqueues inside a transaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rainier_queue.connections import open_queue as open_url
from rainier_queue.drivers import DriverContext, driver_class
from rainier_queue.errors import SpelledOtherwise, UnknownOption
from rainier_queue.schemes import scheme_of

from .backends import Backend


def refusal(backend: Backend, url: str, option: str, value: object) -> str:
    """The message `option` beside the URL is refused with; the same one in its query."""
    with pytest.raises(SpelledOtherwise) as beside:
        open_url(url, {**backend.options, option: value}, DriverContext())
    separator = "&" if "?" in url else "?"
    with pytest.raises(SpelledOtherwise) as in_query:
        open_url(f"{url}{separator}{option}={value}", backend.options, DriverContext())
    message = str(beside.value)
    assert f"does not take `{option}`: " in message
    assert "(in the URL's query)" in str(in_query.value)
    assert str(in_query.value).split(": ", 1)[1] == message.split(": ", 1)[1]
    assert "  " not in message
    return message


async def test_retry_after_is_called_lease_here(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)

    for name in ("retry_after", "reservation"):
        message = refusal(backend, url, name, 30)
        assert "calls it `lease`" in message
        assert "same setting" in message


async def test_after_commit_is_refused_either_way_with_both_sides_explained(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    transactional = driver_class(scheme_of(url)).capabilities.transactional_enqueue

    for value in ("true", "false"):
        message = refusal(backend, url, "after_commit", value)
        assert "no transaction API" in message
        assert "`true` cannot be honoured" in message
        assert "`false` is the only behaviour" in message
        assert "transactional enqueue" in message
        assert ("this driver has it" in message) is transactional


async def test_block_for_names_block_and_the_idle_wait_used_instead(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    driver = driver_class(scheme_of(url))

    message = refusal(backend, url, "block_for", 5)

    assert "`BLOCK`" in message
    assert driver.idle_wait in message
    assert "`sleep`" in message


async def test_a_pool_size_names_this_drivers_pool_settings_or_says_it_has_none(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    pooled = "pool_max" in driver_class(scheme_of(url)).OPTIONS

    for name in ("pool_size", "max_connections", "min_connections"):
        message = refusal(backend, url, name, "10")  # a string gets the answer, not a type error
        if pooled:
            assert "`pool_min` and `pool_max`" in message
        else:
            assert "pool" in message or "opens no connection" in message


async def test_table_and_connection_say_what_they_mean_here(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    driver = driver_class(scheme_of(url))

    table = refusal(backend, url, "table", "jobs")
    connection = refusal(backend, url, "connection", "cache")

    if "migrate" in driver.OPTIONS:
        assert "migrations" in table
        assert "`prefix`" in table
    else:
        assert "keeps no table" in table
    assert "`url`" in connection
    assert "database index" in connection
    assert "`locks`" in connection


async def test_prefix_is_an_option_or_is_named_for_what_the_driver_prefixes(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    url = backend.url(tmp_path, namespace)
    driver = driver_class(scheme_of(url))
    if "prefix" in driver.OPTIONS:
        pytest.skip(f"the {driver.name} driver takes `prefix`")

    if "topic_prefix" in driver.OPTIONS:
        assert "`topic_prefix`" in refusal(backend, url, "prefix", "app.")
    else:
        with pytest.raises(UnknownOption, match="does not take `prefix`"):
            open_url(url, {**backend.options, "prefix": "app."}, DriverContext())
