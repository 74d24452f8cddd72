# SPDX-License-Identifier: MIT
"""What the MySQL queue and the MySQL cache share: the pool and one error translation.

Both stores talk to the server through an aiomysql pool set up the same way,
and the worker has to tell an outage (wait) from a refusal (tell a human)
whichever of them failed. So the pool is opened, the server's version is
checked and every pymysql/aiomysql exception is translated here, at the one
place both stores call through; the URL and the TLS options are read into
a `ServerAddress` and a `ClientTLS` first (address.py).

Every connection is opened with:

- `charset=utf8mb4`, so a 4-byte character (an emoji) is sent as itself and
  never as `?`; the tables declare utf8mb4 on every text column too;
- `CLIENT.FOUND_ROWS`, so an UPDATE reports the rows it *matched*, not the
  rows whose values changed: a token-fenced settle that writes what is
  already there still counts as found, and zero means "not ours" only;
- `autocommit` off, so a transaction starts with its first statement (no
  `BEGIN` round trip) and ends with our `COMMIT` or `ROLLBACK`;
- READ COMMITTED, so a claim's `FOR UPDATE` locks the rows it takes and no
  gaps between them: a push never waits behind a claim, and two claims do
  not deadlock on each other's gap locks;
- a strict `sql_mode`, so a value too long for its column is an error rather
  than silently cut short (which would corrupt a job or a lock key).

TLS is off unless the URL asks for it (`ssl=true`, or `ssl_ca=` an
authority's file), and then the server's certificate and host name are
checked (`ClientTLS`). aiomysql itself would carry on without TLS when the
server does not offer it; the pool refuses such a connection instead.
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Callable, Coroutine, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import aiomysql  # type: ignore[import-untyped]
import pymysql  # type: ignore[import-untyped]
from pymysql.constants import CLIENT  # type: ignore[import-untyped]

from ...._wakeup import Wakeup
from ....errors import (
    BrokerRejected,
    BrokerUnavailable,
    ConfigurationError,
    DuplicateJob,
    OutcomeUnknown,
    TLSVerificationError,
)
from ... import tls
from ..dialect import Row
from .address import TLS_FIX, ClientTLS, ServerAddress, check_version

T = TypeVar("T")

NOW_US = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
"""The server's clock in microseconds since the epoch, whatever its time zone."""

_SQL_MODE = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO'"

_RETRIED = frozenset({1205, 1213})
"""Lock wait timeout, deadlock: the server rolled the work back, so running it again is safe."""
_RETRIES = 4

_UNAVAILABLE = frozenset({1040, 1053, 1077, 1152, 1158, 1159, 1160, 1161, 1927, 4031})
"""Server-side codes that mean "try again later": too many connections, shutting
down, aborted or killed connections, read/write timeouts on the wire."""

DEAD_PEER = (
    (socket.SOL_SOCKET, "SO_KEEPALIVE", 1),
    (socket.IPPROTO_TCP, "TCP_KEEPIDLE", 10),
    (socket.IPPROTO_TCP, "TCP_KEEPINTVL", 5),
    (socket.IPPROTO_TCP, "TCP_KEEPCNT", 3),
    (socket.IPPROTO_TCP, "TCP_USER_TIMEOUT", 10_000),
)
"""Socket options that give up on a server gone silent within seconds, not hours.

aiomysql has no read timeout, and the operating system's defaults keep a
query on a dead connection waiting about fifteen minutes (an idle one, two
hours). Data left unacknowledged for 10 s, or three missed probes 5 s apart
after 10 s of quiet, end the connection instead, which the worker rides out
as an outage. Options this platform lacks are skipped."""

_WRONG_SETTINGS = {
    1044: "grant the user access to that database, or connect as one that has it",
    1045: "fix the user name and password in the URL",
    1049: "create the database (CREATE DATABASE ...) or fix its name in the URL",
    1142: "grant the user the privileges the queue needs on its tables",
    1698: "fix the user name and password in the URL",
}
"""Refusals no wait will fix (access denied, unknown database), each with what to do."""
_NO_TABLE = 1146
_DUPLICATE_KEY = 1062
_ALREADY_THERE = frozenset({1050, 1060, 1061, 1826})  # table, column, index, check
"""Table exists, index name exists."""


def translate(exc: BaseException, address: ServerAddress) -> BaseException:
    """Our exception for a client library's, or `exc` itself when it is not the client's."""
    connecting = pymysql.err.OperationalError | pymysql.err.InterfaceError | OSError
    if isinstance(exc, connecting) and tls.is_verification_failure(exc):
        return tls.verification_failed("MySQL", address.endpoint, exc, fix=TLS_FIX)
    where = address.describe()
    if isinstance(exc, pymysql.err.Error) and (fix := _WRONG_SETTINGS.get(_code(exc))):
        return ConfigurationError(f"MySQL at {where} refused: {exc}; {fix}")
    if isinstance(exc, pymysql.err.OperationalError | pymysql.err.InternalError):
        code = _code(exc)
        if code in _RETRIED or code in _UNAVAILABLE or 2000 <= code < 3000:
            return BrokerUnavailable(f"MySQL at {where} is unavailable: {exc}")
        if code == _NO_TABLE:
            return BrokerRejected(
                f"MySQL at {where} lacks a table ({exc}); "
                "run `rainier-queue provision` or open the queue with migrate = true"
            )
        return BrokerRejected(f"MySQL at {where} refused the operation: {exc}")
    if isinstance(exc, pymysql.err.ProgrammingError) and _code(exc) == _NO_TABLE:
        return BrokerRejected(
            f"MySQL at {where} lacks a table ({exc}); "
            "run `rainier-queue provision` or open the queue with migrate = true"
        )
    if isinstance(exc, pymysql.err.InterfaceError):
        return BrokerUnavailable(f"the connection to MySQL at {where} is gone: {exc}")
    if (
        isinstance(exc, pymysql.err.IntegrityError)
        and _code(exc) == _DUPLICATE_KEY
        and "jobs_id" in str(exc)
    ):
        return DuplicateJob(f"MySQL at {where} holds a job with that id already: {exc}")
    if isinstance(exc, pymysql.err.Error):
        return BrokerRejected(f"MySQL at {where} refused the operation: {exc}")
    if isinstance(exc, OSError | TimeoutError | EOFError):
        return BrokerUnavailable(f"MySQL at {where} is unreachable: {exc!r}")
    return exc


def _code(exc: BaseException) -> int:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else 0


class _QuietCursor(aiomysql.Cursor):  # type: ignore[misc]
    """A cursor that does not turn server notes into Python warnings.

    aiomysql asks the server for its warnings after any statement that had
    some (one more round trip) and re-raises each as a `Warning`. With a
    strict `sql_mode` the warnings that matter are errors already; what is
    left ("table already exists" from `IF NOT EXISTS`) is noise.
    """

    async def _show_warnings(self, conn: Any) -> None:
        return None


class PlainCursors:
    """The application's connection, handing out plain (tuple) cursors whatever its default.

    An application may open its connections with `DictCursor`; the queue's
    statements read rows by position.
    """

    def __init__(self, conn: Any) -> None:
        if not isinstance(conn, aiomysql.Connection):
            raise TypeError(
                "push_in on MySQL takes the application's aiomysql connection, "
                f"not {type(conn).__name__}"
            )
        self._conn = conn

    def cursor(self) -> Any:
        return self._conn.cursor(aiomysql.Cursor)


class Session:
    """One connection inside one transaction, as a unit of work sees it."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.release_locks: list[str] = []
        """Named locks (`GET_LOCK`) to give back once the transaction ends."""
        self.migrating = False
        """Under the migration lock: a table or index that exists already is no error,
        since DDL commits on its own and a migration cut short left it behind."""

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        async with self._conn.cursor() as cur:
            try:
                await cur.execute(sql, tuple(params) if params else None)
            except pymysql.err.Error as exc:
                if self.migrating and _code(exc) in _ALREADY_THERE:
                    return 0
                raise
            return int(cur.rowcount)

    async def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        async with self._conn.cursor() as cur:
            await cur.executemany(sql, [tuple(row) for row in rows])

    async def fetchall(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        async with self._conn.cursor() as cur:
            await cur.execute(sql, tuple(params) if params else None)
            return list(await cur.fetchall())

    async def insert_new(self, sql: str, params: Sequence[object]) -> bool:
        """Run an INSERT; False (and nothing written) if its key is taken already."""
        try:
            await self.execute(sql, params)
        except pymysql.err.IntegrityError as exc:
            if _code(exc) == _DUPLICATE_KEY:
                return False
            raise
        return True


_WAKEUPS: weakref.WeakValueDictionary[str, Wakeup] = weakref.WeakValueDictionary()


def wakeup_for(address: ServerAddress) -> Wakeup:
    """One wake-up signal per database in this process, shared by every queue on it."""
    key = f"{address.host}:{address.port}/{address.database}"
    wakeup = _WAKEUPS.get(key)
    if wakeup is None:
        wakeup = _WAKEUPS[key] = Wakeup()
    return wakeup


class MySQLPool:
    """An aiomysql pool opened on first use (on the loop that uses it), and transactions on it."""

    def __init__(
        self,
        address: ServerAddress,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: timedelta = timedelta(seconds=10),
        client_tls: ClientTLS | None = None,
    ) -> None:
        if not 0 <= pool_min <= pool_max or pool_max < 1:
            raise ConfigurationError(
                f"the pool needs 0 <= pool_min <= pool_max and pool_max >= 1 "
                f"(got pool_min={pool_min}, pool_max={pool_max})"
            )
        self.address = address
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._connect_timeout = connect_timeout
        self._tls = client_tls
        self._pool: Any = None
        self._opening: asyncio.Lock | None = None
        self._closed = False

    async def _get(self) -> Any:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise BrokerUnavailable(f"the MySQL pool for {self.address.describe()} is closed")
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
        return self._pool

    async def _open(self) -> Any:
        a = self.address
        try:
            pool = await aiomysql.create_pool(
                minsize=self._pool_min,
                maxsize=self._pool_max,
                host=a.host,
                port=a.port,
                user=a.user,
                password=a.password,
                db=a.database,
                charset="utf8mb4",
                client_flag=CLIENT.FOUND_ROWS,
                autocommit=False,
                sql_mode=_SQL_MODE,
                init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                connect_timeout=self._connect_timeout.total_seconds(),
                cursorclass=_QuietCursor,
                ssl=None if self._tls is None else self._tls.context,
            )
        except Exception as exc:
            raise translate(exc, a) from exc
        if self._tls is not None and not self._tls.verify:
            tls.warn_unverified(a.describe())
        try:
            conn = await pool.acquire()
            try:
                self._prepared(conn)
                async with conn.cursor() as cur:
                    await cur.execute("SELECT VERSION()")
                    (version,) = await cur.fetchone()
                await conn.rollback()
            finally:
                pool.release(conn)
            check_version(str(version))
        except BaseException as exc:
            pool.close()
            await pool.wait_closed()
            if isinstance(exc, Exception) and (ours := translate(exc, a)) is not exc:
                raise ours from exc
            raise
        return pool

    async def run(
        self, work: Callable[[Session], Coroutine[Any, Any, T]], *, retry: bool = True
    ) -> T:
        """Run `work` in one transaction: committed if it returns, rolled back if it raises.

        A deadlock or lock-wait timeout (which the server rolled back) runs
        the work again, a few times, before it is reported as unavailable.
        A connection lost while the `COMMIT` was on its way is `OutcomeUnknown`
        and is never run again: the server may have committed it.
        """
        where = self.address.describe()
        pool = await self._get()
        attempt = 0
        while True:
            attempt += 1
            try:
                conn = await pool.acquire()
            except Exception as exc:
                raise translate(exc, self.address) from exc
            try:
                self._prepared(conn)
            except TLSVerificationError:
                conn.close()
                pool.release(conn)
                raise
            session = Session(conn)
            committing = False
            try:
                result = await work(session)
                committing = True
                await conn.commit()
            except BaseException as exc:
                if committing and _lost_in_flight(exc):
                    conn.close()  # a reply may still be on the wire, or never come
                    pool.release(conn)
                    if isinstance(exc, Exception):
                        raise OutcomeUnknown(
                            f"MySQL at {where}: the connection was lost while committing, so "
                            "whether the work was applied is unknown (a push may have been "
                            f"written; it is not retried): {exc!r}"
                        ) from exc
                    raise
                await _abandon(conn, session, exc)
                pool.release(conn)
                if (
                    retry
                    and attempt < _RETRIES
                    and isinstance(exc, pymysql.err.Error)
                    and _code(exc) in _RETRIED
                ):
                    await asyncio.sleep(0.005 * 2**attempt)
                    continue
                if isinstance(exc, Exception):
                    translated = translate(exc, self.address)
                    if translated is not exc:
                        raise translated from exc
                raise
            await _release_locks(conn, session)
            pool.release(conn)
            return result

    def transport_warnings(self) -> list[str]:
        """What `doctor` says of how jobs travel: in the clear to another machine, or unchecked."""
        return tls.transport_warnings(
            f"MySQL at {self.address.endpoint}",
            encrypted=self._tls is not None,
            verified=self._tls is None or self._tls.verify,
            remote=tls.is_remote(self.address.host),
            fix="serve TLS and add ssl_ca=/path/to/ca.pem (or ssl=true) to the URL",
        )

    def _prepared(self, conn: Any) -> None:
        """Set `DEAD_PEER` on a connection the first time it is handed out, and check its TLS."""
        if not getattr(conn, "_rq_prepared", False):
            transport = getattr(getattr(conn, "_writer", None), "transport", None)
            sock = None if transport is None else transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                for level, name, value in DEAD_PEER:
                    if hasattr(socket, name):
                        sock.setsockopt(level, getattr(socket, name), value)
            conn._rq_prepared = True
        self._check_secure(conn)

    def _check_secure(self, conn: Any) -> None:
        """Refuse a connection that was to use TLS and does not (aiomysql would carry on)."""
        if self._tls is not None and not getattr(conn, "_secure", False):
            endpoint = self.address.endpoint
            raise TLSVerificationError(
                f"MySQL at {endpoint} did not offer TLS, which this connection was to "
                "use, so it is not used: turn TLS on in the server (ssl_cert, ssl_key), or "
                "remove ssl, ssl_ca and insecure_skip_verify from the URL to connect in the clear",
                host=endpoint,
            )

    async def aclose(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
            await pool.wait_closed()


def _lost_in_flight(exc: BaseException) -> bool:
    """Whether `exc` is the connection failing (or the caller giving up) with no answer read.

    An error the server sent back is an answer: the transaction was not
    committed. A dropped connection, a timeout or a cancellation is not.
    """
    if isinstance(exc, pymysql.err.OperationalError):
        return 2000 <= _code(exc) < 3000  # the client's own codes: the wire failed
    return isinstance(
        exc, pymysql.err.InterfaceError | OSError | EOFError | TimeoutError | asyncio.CancelledError
    )


async def _abandon(conn: Any, session: Session, exc: BaseException) -> None:
    """Roll back after `exc`; close the connection instead if its state is unknown."""
    server_rolled_back = isinstance(exc, pymysql.err.Error) and _code(exc) in _RETRIED
    if server_rolled_back or (
        isinstance(exc, Exception)
        and not isinstance(exc, pymysql.err.OperationalError | pymysql.err.InterfaceError | OSError)
    ):
        try:
            await conn.rollback()
            await _release_locks(conn, session)
            return
        except Exception:  # falls through to closing the connection
            pass
    # Cancelled mid-statement, or the connection failed: a reply may still be
    # on the wire, so the connection must never be handed to anyone else.
    # Closing it also ends its transaction and frees its named locks.
    conn.close()


async def _release_locks(conn: Any, session: Session) -> None:
    for name in session.release_locks:
        async with conn.cursor() as cur:
            await cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
    session.release_locks.clear()


__all__ = ["NOW_US", "MySQLPool", "PlainCursors", "Session", "translate", "wakeup_for"]
