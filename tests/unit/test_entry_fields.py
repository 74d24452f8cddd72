# SPDX-License-Identifier: MIT
"""The depth limit on stored JSON, measured from the text before anything is parsed."""

from __future__ import annotations

import json

import pytest

from rainier_queue.entry_fields import MAX_DEPTH, check_depth, parse_json
from rainier_queue.errors import MalformedEntry


def _nested(levels: int) -> str:
    return '[{"a":' * (levels // 2) + "1" + "}]" * (levels // 2)


def test_nesting_up_to_the_limit_is_read_and_one_level_more_is_refused() -> None:
    assert parse_json(_nested(MAX_DEPTH), "payload") is not None
    with pytest.raises(MalformedEntry, match=f"nested more than {MAX_DEPTH} levels"):
        check_depth(_nested(MAX_DEPTH + 2))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"note": "[" * 5000 + '\\" {{{ ' + "]" * 10, "deeper": [[["x"]]]})

    check_depth(text)

    assert parse_json(text, "payload")["deeper"] == [[["x"]]]  # type: ignore[index]


def test_a_large_shallow_payload_with_many_brackets_is_not_refused() -> None:
    rows = [{"id": i, "tags": ["a", "b"], "note": 'say "hi" [ok]'} for i in range(5000)]

    assert parse_json(json.dumps(rows), "payload") == rows


def test_unbalanced_text_too_deep_for_the_parser_is_refused_as_too_deep() -> None:
    with pytest.raises(MalformedEntry, match="nested more than"):
        parse_json("[" * 20_000, "payload")


@pytest.mark.parametrize("number", ["1e999", "-1.5e400", "1" + "0" * 400 + ".0"])
def test_a_number_too_large_for_a_float_is_refused_with_where_it_is(number: str) -> None:
    text = f'{{"price": 1.5, "lines": [{{"qty": 1, "ratio": {number}}}]}}'

    with pytest.raises(MalformedEntry) as caught:
        parse_json(text, "payload")

    assert "`payload`" in str(caught.value)
    assert "at `lines[0].ratio`" in str(caught.value)
    assert "beyond what a float holds" in str(caught.value)


def test_large_finite_numbers_and_integers_are_read_as_they_are() -> None:
    big = 10**400

    text = '{"a": 1.7976931348623157e308, "b": ' + str(big) + "}"

    assert parse_json(text, "payload") == {
        "a": 1.7976931348623157e308,
        "b": big,
    }
