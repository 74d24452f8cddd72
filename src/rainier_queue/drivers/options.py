# SPDX-License-Identifier: MIT
"""Reading a driver's options, written once: every driver reads its URL and table here.

Options arrive two ways, in the URL's query (`sqlite:///jobs.db?lease=30s`)
and in the connection's table (`{url = "...", lease = "30s"}`), and must
mean the same, the table winning where both say something. Each driver
used to read them itself, and the copies drifted: one store refused a
misspelt option with a bare `ValueError` while its queue suggested the
right name, one whole-number parser took `3.7` as 3 while another refused
it, and four drivers checked a lease of zero in four wordings. Read here,
they cannot drift, and a new driver writes none of it:

- `Options.merge` (and `Options.from_url`, for a URL that names no server):
  the two sources merged, a key the driver does not take refused with a
  "did you mean";
- `Options.duration`, `.lease`, `.flag`, `.count`, `.text`, `.prefix`: one
  option read as what it is, a bad value refused with what to write instead;
- `check_lease` and `check_positive`: the same checks for a value handed
  to a constructor directly, not read from text;
- `DriverSettings`: the shape of a driver's frozen settings object, which
  the queue and its lock store both read (`settings.py` in every driver
  package). `read` is written here; a driver writes where its URL keeps its
  query (`query_of`) and what its own fields are (`build`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, urlsplit

from ..durations import parse_duration
from ..errors import ConfigurationError, UnknownOption
from ..flags import parse_flag


class Options(Mapping[str, Any]):
    """A driver's options from the URL's query and its table, every key one it takes."""

    __slots__ = ("_given", "known", "where")

    def __init__(self, given: Mapping[str, Any], *, known: frozenset[str], where: str) -> None:
        self._given = dict(given)
        self.known = known
        """Every option the reader takes (the URL's query loses these before a client sees it)."""
        self.where = where
        """Who reads them, for errors: "the `redis` driver"."""

    @classmethod
    def merge(
        cls,
        query: Mapping[str, str],
        options: Mapping[str, Any] | None,
        known: Iterable[str],
        where: str,
    ) -> Self:
        """The URL's query options overridden by the table's, each checked against `known`."""
        allowed = frozenset(known)
        merged: dict[str, Any] = {**query, **(options or {})}
        for key in merged:
            if key not in allowed:
                raise UnknownOption(where, key, allowed)
        return cls(merged, known=allowed, where=where)

    @classmethod
    def from_url(
        cls,
        url: str,
        known: Iterable[str],
        where: str,
        options: Mapping[str, Any] | None = None,
    ) -> Self:
        """`merge` for a URL whose client reads no query of its own (`memory://?lease=5s`).

        The README promises that such a URL takes the driver's options too;
        a key in its query the driver does not take is refused as one in the
        table would be, saying it was in the URL.
        """
        allowed = frozenset(known)
        query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
        for key in query:
            if key not in allowed:
                raise UnknownOption(f"{where} (in the URL's query)", key, allowed)
        return cls.merge(query, options, allowed, where)

    def __getitem__(self, key: str) -> Any:
        return self._given[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)

    def __repr__(self) -> str:  # values may hold credentials (a lock store's URL)
        return f"Options({sorted(self._given)} for {self.where})"

    def only(self, keys: Iterable[str]) -> Options:
        """The options among `keys` that were given: a part's own share of them."""
        wanted = frozenset(keys)
        given = {key: value for key, value in self._given.items() if key in wanted}
        return Options(given, known=self.known, where=self.where)

    def text(self, key: str, default: str) -> str:
        """A text option; an empty value is the default (`?group=` means "the usual")."""
        value = self._given.get(key)
        return default if value is None or value == "" else str(value)

    def duration(self, key: str, default: timedelta) -> timedelta:
        """A duration (`30s`, `250ms`, a number of seconds, or a `timedelta`), never negative."""
        value = self._given.get(key)
        return default if value is None else parse_duration(value, setting=key)

    def positive_duration(self, key: str, default: timedelta) -> timedelta:
        """`duration`, refusing zero too: a wait or a poll of no length."""
        return check_positive(self.duration(key, default), setting=key)

    def lease(self, default: timedelta) -> timedelta:
        """The `lease` option: how long a reserved job is held before another worker may take it."""
        return check_lease(self.duration("lease", default))

    def flag(self, key: str, default: bool) -> bool:
        """True or false (`true`, `yes`, `on`, `1` and their opposites, or a real boolean)."""
        return parse_flag(self._given.get(key, default), setting=key)

    def count(self, key: str, default: int, *, minimum: int | None = None) -> int:
        """A whole number (a pool's size, replicas to wait for), at least `minimum` if given."""
        return whole_number(self._given.get(key, default), setting=key, minimum=minimum)

    def prefix(self, key: str, default: str, check: Callable[[object], str]) -> str:
        """A prefix of names (tables, keys, topics), as `check` allows for that store.

        `check` returns the prefix or raises `ValueError` (or `ConfigurationError`)
        saying what is wrong with it; either way it is a `ConfigurationError`.
        """
        try:
            return check(self._given.get(key, default))
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None


def whole_number(value: object, *, setting: str, minimum: int | None = None) -> int:
    """A whole-number option from a URL's query or a config table: an int, or its digits.

    Not a boolean (TOML's `true` is not 1) and not a real number (`3.7` is
    not a pool size, and `3.0` is written `3`).
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        wanted = "a whole number" if minimum is None else f"a whole number of at least {minimum}"
        raise ConfigurationError(f"`{setting}` must be {wanted}, not {value!r}")
    if minimum == 0 and number < 0:
        raise ConfigurationError(f"`{setting}` cannot be negative (got {value!r})")
    if minimum is not None and number < minimum:
        raise ConfigurationError(
            f"`{setting}` must be a whole number of at least {minimum}, not {value!r}"
        )
    return number


def check_positive(value: timedelta, *, setting: str) -> timedelta:
    """`value`, if it is longer than zero; a wait of no length is a mistake, not a choice."""
    if value <= timedelta(0):
        raise ConfigurationError(f"`{setting}` must be longer than zero (got {value})")
    return value


def check_lease(lease: timedelta) -> timedelta:
    """A lease, if it is longer than zero: one that lapses at once would hand every
    running job to another worker."""
    return check_positive(lease, setting="lease")


class DriverSettings(abc.ABC):
    """The shape of every driver's settings object (`settings.py` in its package).

    One frozen object, read once from a URL and its table, that the queue
    and the driver's lock store (`cache/<driver>.py`) both build from, so the
    two cannot read one option two ways. Each adds only its own options
    (`lease` and `migrate` for a queue) through `read`'s `extra`, and gets
    them back, checked, as an `Options`.

    A subclass is a `@dataclass(frozen=True, slots=True, kw_only=True)` that
    sets `OPTIONS` and writes `query_of` and `build`.
    """

    __slots__ = ()

    OPTIONS: ClassVar[frozenset[str]]
    """The options the settings themselves take (the queue's and the store's alike)."""

    @classmethod
    def read(
        cls,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        who: str,
        extra: frozenset[str] = frozenset(),
    ) -> tuple[Self, Options]:
        """The settings from `url` and `options` (which win), and the `extra` options given.

        An option that is neither the settings' nor in `extra` is `UnknownOption`,
        with a suggestion, whichever of the two places it was in.
        """
        known = cls.OPTIONS | extra
        given = Options.merge(cls.query_of(url, known, who), options, known, who)
        return cls.build(url, given), given.only(extra)

    @classmethod
    @abc.abstractmethod
    def query_of(cls, url: str, known: frozenset[str], who: str) -> Mapping[str, str]:
        """The options in `url`'s query that are this library's (`known`).

        A driver whose client reads the rest of the query (libpq, redis-py)
        leaves it to the client, which refuses what it does not take; one
        whose client reads none refuses any other key here. Raises a
        `ConfigurationError` for a URL that is not this driver's.
        """

    @classmethod
    @abc.abstractmethod
    def build(cls, url: str, options: Options) -> Self:
        """The settings for `url`, with `options` (merged and checked already) read."""


__all__ = [
    "DriverSettings",
    "Options",
    "check_lease",
    "check_positive",
    "whole_number",
]
