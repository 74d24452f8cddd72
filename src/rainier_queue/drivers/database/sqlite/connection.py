# SPDX-License-Identifier: MIT
"""What the SQLite queue and the SQLite cache share: one thread, one connection, one translation.

A `sqlite3.Connection` must not be used from two threads at once, and an
asyncio program must not block its loop on a disk write or on another
process's lock. So each store owns one connection on one thread of its own
(`one_thread.py`), and every call hops there. Nothing
else ever touches the connection, so `check_same_thread` stays on as a
guard.

sqlite3 raises `OperationalError` for a busy file, a missing table and a
full disk alike; the worker has to tell an outage (wait) from a refusal
(tell a human). That translation happens here, at the one place both
stores call through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from ....errors import BrokerRejected, BrokerUnavailable, ConfigurationError, DuplicateJob
from .one_thread import OneThread

T = TypeVar("T")

_UNAVAILABLE = ("locked", "busy", "unable to open", "disk i/o error")
"""`OperationalError` texts that mean "try again later", not "this cannot work"."""


def path_from_url(url: str, *, what: str = "SQLite") -> tuple[str, dict[str, str]]:
    """The file path and query options of `sqlite:///relative.db` or `sqlite:////abs/path.db`.

    An in-memory database is refused: it lives inside one connection, so
    nothing in it survives, and no other worker or process can see it.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise ConfigurationError(f"{what} takes a `sqlite:` URL, not {parts.scheme!r}")
    if parts.netloc == ":memory:" or unquote(parts.path).lstrip("/") == ":memory:":
        raise ConfigurationError(
            f"{what} refuses an in-memory database: it would live in one connection, so it "
            "survives nothing and no other worker sees it. Use `memory://` for that, or a "
            "file such as `sqlite:///jobs.db`"
        )
    if parts.netloc:
        raise ConfigurationError(
            f"a SQLite URL names a file, not a host (got host {parts.netloc!r}); write "
            "`sqlite:///relative.db` or `sqlite:////absolute/path.db`"
        )
    path = unquote(parts.path)[1:]  # the third slash separates the empty host from the path
    if not path:
        raise ConfigurationError(
            "a SQLite URL needs a file: `sqlite:///relative.db` or `sqlite:////absolute/path.db`"
        )
    return path, dict(parse_qsl(parts.query, keep_blank_values=True))


def resolve_file(path: str | os.PathLike[str]) -> str:
    """An absolute path, checked for a directory that exists.

    Resolved once, at construction, so a later `chdir` cannot move the queue,
    and a typo in the directory is a configuration error at startup rather
    than an outage the worker would wait out forever.
    """
    full = os.path.abspath(os.path.expanduser(os.fspath(path)))
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise ConfigurationError(f"the SQLite file's directory {folder!r} does not exist")
    return full


def check_same_file(connection: sqlite3.Connection, path: str) -> None:
    """Refuse an application connection to another file than the queue's, naming both.

    A job written into another file's tables would be committed where no
    worker of this queue looks, so the mistake is refused before any write.
    """
    if not isinstance(connection, sqlite3.Connection):
        raise TypeError(
            "push_in on SQLite takes the application's sqlite3.Connection, "
            f"not {type(connection).__name__}"
        )
    files = [row[2] for row in connection.execute("PRAGMA database_list") if row[1] == "main"]
    main = files[0] if files else ""
    if not main or os.path.realpath(main) != os.path.realpath(path):
        raise ConfigurationError(
            f"push_in was given a connection to {main or 'an in-memory database'!r}, but this "
            f"queue's file is {path!r}: open the application's connection on the queue's file"
        )


@contextlib.contextmanager
def translated(path: str) -> Iterator[None]:
    """Turn sqlite3's exceptions into ours, keeping the original as the cause."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if ("unable to open" in text or "readonly" in text) and (why := _unusable(path)):
            raise ConfigurationError(f"SQLite file {path} cannot be used: {why}") from exc
        if any(marker in text for marker in _UNAVAILABLE):
            raise BrokerUnavailable(f"SQLite file {path} is unavailable: {exc}") from exc
        if "no such table" in text:
            raise BrokerRejected(
                f"SQLite file {path} lacks the queue's tables ({exc}); "
                "run `rainier-queue provision` or open it with migrate = true"
            ) from exc
        raise BrokerRejected(f"SQLite refused the operation on {path}: {exc}") from exc
    except sqlite3.IntegrityError as exc:
        if str(exc).startswith("UNIQUE constraint failed") and str(exc).endswith("jobs.id"):
            raise DuplicateJob(
                f"SQLite file {path} holds a job with that id already: {exc}"
            ) from exc
        raise BrokerRejected(f"SQLite refused the write on {path}: {exc}") from exc
    except sqlite3.DataError as exc:
        raise BrokerRejected(f"SQLite refused the write on {path}: {exc}") from exc
    except sqlite3.DatabaseError as exc:  # "file is not a database", corruption
        raise BrokerRejected(f"SQLite cannot use {path}: {exc}") from exc


def _unusable(path: str) -> str | None:
    """Why `path` can never be opened for writing as it stands, or None if it might be.

    "unable to open database file" also comes from passing trouble (no file
    handles left, a network share that blinked), which is worth waiting out;
    a directory this process may not write to is not, and neither is a path
    that names a directory. SQLite writes its journal beside the file, so the
    directory must be writable even when the file exists.
    """
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return "the path names a directory; give the URL a file name inside it"
    if not _may_create_in(folder):
        return (
            f"this process may not write to its directory {folder!r} (SQLite writes its "
            "journal there too); make it writable for this user, or put the file elsewhere"
        )
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "the file is read-only for this user; make it writable, or use another file"
    return None


def _may_create_in(folder: str) -> bool:
    """Whether a file can be made in `folder`: tried, since `os.access` says yes to root
    even where the file system says no."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".rainier-queue-probe-", dir=folder)
    except OSError as exc:
        return exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS)
    os.close(handle)
    os.unlink(probe)
    return True


class SQLiteThread:
    """One SQLite connection, opened on and used only by one dedicated thread."""

    def __init__(
        self,
        path: str,
        *,
        busy_timeout: timedelta,
        pragmas: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self._busy_ms = max(0, int(busy_timeout.total_seconds() * 1000))
        self._pragmas = dict(pragmas or {})
        self._thread = _one_thread()
        self._conn: sqlite3.Connection | None = None
        self._synchronous: str | None = None
        """The connection's `synchronous` setting now; touched only on its thread."""
        self._pid = os.getpid()
        self._closed = False

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` on the connection's thread and return its result.

        If the awaiting task is cancelled, `fn` still runs to its end on the
        thread (a transaction is never cut in half); only its result is lost.
        """
        if self._closed:
            raise BrokerUnavailable(f"the SQLite connection to {self.path} is closed")
        if os.getpid() != self._pid:
            self._after_fork()
        with translated(self.path):
            return await self._thread.submit(self._on_thread, fn)

    async def transaction(
        self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = True
    ) -> T:
        """Run `fn` inside `BEGIN IMMEDIATE`: committed if it returns, rolled back if it raises.

        IMMEDIATE takes the file's write lock up front, so two processes can
        never both read the same row as free and then both claim it; the
        second waits (up to `busy_timeout`) and then sees the first's claim.
        `durable=False` commits with `synchronous=NORMAL`, whatever the
        connection's own setting: the commit does not wait for the disk, and
        a power cut (not a killed process) may undo it.
        """
        wanted = self._pragmas.get("synchronous") if durable else "NORMAL"

        def run(conn: sqlite3.Connection) -> T:
            if wanted is not None and wanted != self._synchronous:
                conn.execute(f"PRAGMA synchronous = {wanted}")  # never inside a transaction
                self._synchronous = wanted
            return _in_transaction(conn, fn)

        return await self.call(run)

    def _after_fork(self) -> None:
        # A forked child inherits neither the thread (no call would ever
        # run) nor a usable connection (SQLite forbids using one across a
        # fork). Start over with both, leaving the parent's alone.
        self._thread = _one_thread()
        self._conn = None
        self._synchronous = None
        self._pid = os.getpid()

    def _on_thread(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            self._conn = self._open()
        return fn(self._conn)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._busy_ms / 1000, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            self._use_wal(conn)
            for name, value in self._pragmas.items():
                conn.execute(f"PRAGMA {name} = {value}")
        except BaseException:
            conn.close()
            raise
        self._synchronous = self._pragmas.get("synchronous")
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Put the file in WAL mode, waiting out another connection's lock if need be.

        Switching a file's journal mode does not wait for a busy file the way
        a write does: two processes opening a fresh file at once (a worker
        started with `--processes 2`) had one fail with "database is locked".
        Once any of them has switched, the others find WAL already and skip it.
        """
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
                if str(mode).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)  # on the connection's own thread, never the event loop

    async def aclose(self) -> None:
        """Close the connection on its own thread, then let the thread go."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._thread.submit(self._close_on_thread, None)
        finally:
            self._thread.stop()

    def _close_on_thread(self, _: None) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _one_thread() -> OneThread:
    return OneThread("rainier-sqlite")


def _in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
