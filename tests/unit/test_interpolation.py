# SPDX-License-Identifier: MIT
"""`${NAME}` in config files: replaced from the environment handed over, never guessed."""

from __future__ import annotations

import pytest

from rainier_queue.errors import ConfigurationError
from rainier_queue.interpolation import interpolate


def test_names_in_strings_nested_anywhere_are_replaced_and_literals_kept() -> None:
    data = {
        "connections": {"main": {"url": "postgresql://app:${PW}@db/app", "lease": "90s"}},
        "queues": ["${FIRST}", "default"],
        "count": 3,
        "literal": "costs $${HOME} dollars",
    }

    done = interpolate(data, {"PW": "s3cret", "FIRST": "high"}, source="test.toml")

    assert done == {
        "connections": {"main": {"url": "postgresql://app:s3cret@db/app", "lease": "90s"}},
        "queues": ["high", "default"],
        "count": 3,
        "literal": "costs ${HOME} dollars",
    }


def test_a_name_that_is_not_set_is_an_error_naming_it_and_the_file() -> None:
    with pytest.raises(ConfigurationError, match=r"test\.toml.*`PW`.*not set"):
        interpolate({"url": "redis://:${PW}@h"}, {}, source="test.toml")


def test_with_no_environment_given_the_error_says_how_to_give_one() -> None:
    with pytest.raises(ConfigurationError, match="environ=os.environ"):
        interpolate({"url": "redis://:${PW}@h"}, None, source="test.toml")


def test_a_colon_dash_fallback_stands_in_for_an_unset_or_empty_variable() -> None:
    data = {"a": "${A:-one}", "b": "${B:-two}", "c": "${C:-three}", "d": "${D:-}"}

    done = interpolate(data, {"A": "set", "B": ""}, source="test.toml")

    assert done == {"a": "set", "b": "two", "c": "three", "d": ""}


def test_a_dash_fallback_stands_in_only_for_an_unset_variable() -> None:
    done = interpolate({"a": "${A-one}", "b": "${B-two}"}, {"A": ""}, source="test.toml")

    assert done == {"a": "", "b": "two"}


def test_the_other_shell_forms_are_refused_by_name() -> None:
    for form in ("${A:?gone}", "${A:+x}", "${A=x}", "${A:-${B}}", "${}", "${1A}"):
        with pytest.raises(ConfigurationError, match="does not take"):
            interpolate({"url": form}, {"A": "a", "B": "b"}, source="test.toml")


def test_names_that_are_not_set_can_be_collected_instead_of_refused() -> None:
    unset: list[str] = []

    done = interpolate({"url": "redis://:${PW}@h/${DB:-0}"}, {}, source="t", unset=unset)

    assert done == {"url": "redis://:${PW}@h/0"}
    assert unset == ["PW"]
