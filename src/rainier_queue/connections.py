# SPDX-License-Identifier: MIT
"""Connections: a default plus named backends, declared as data.

One application often talks to more than one backend (SQLite in
development, PostgreSQL for most jobs and Redis for a hot queue in
production), so connections are named, and dispatch picks one by name.
The declaration is plain data, from code, from `rainier-queue.toml`, or
from `[tool.rainier-queue]` in `pyproject.toml`:

```toml
[tool.rainier-queue]
default = "main"                    # which connection `dispatch` uses
app = "myapp.jobs:registry"         # where the CLI finds the jobs
schedule = "myapp.jobs:schedule"    # a Schedule in code, for every `schedule` command
queues = ["high", "default"]        # what a worker serves when told nothing
locks = "sqlite:///jobs.db"         # the store behind unique jobs

[tool.rainier-queue.connections.main]
url = "sqlite:///jobs.db"
lease = "90s"

[tool.rainier-queue.connections.main.worker]   # what `rainier-queue work` runs with
concurrency = 8                     # on this connection; its flags win over these
timeout = "2m"
grace = "1m"

[tool.rainier-queue.connections]
bulk = "memory://"                  # a bare URL is fine too

[tool.rainier-queue.schedules.nightly]   # periodic jobs: see docs/scheduling.md
job = "send-report"
cron = "30 7 * * *"
```

Strings in a file may name environment variables, `${DATABASE_URL}` or
`postgresql://app:${DB_PASSWORD}@db/app`, so credentials stay out of it;
the caller hands over the environment (`load(..., environ=os.environ)`;
the CLI does). `${NAME:-fallback}` and `${NAME-fallback}` mean what they
mean in a shell (see `interpolation.py`). A variable that is not set is an
error naming it: outside `connections`, when the file is read; inside one
connection's table, only when that connection is used, so a process that
uses PostgreSQL alone does not need the Redis password.

A table that names its `driver` and leaves `url` out takes the URL from
the platform's variable for that driver, `REDIS_URL` or `KAFKA_BROKERS`,
in the same handed-over environment (see `environment.py`), and only
then: a table that writes its `url` never reads the variable.

A relative SQLite path in a file (`sqlite:///jobs.db`, as a connection's URL,
its outbox, its `locks` option or the top-level `locks`) is the file beside
that config file, so the dispatcher and a worker started elsewhere open the
same one; on the command line or in code it is relative to the working
directory.

Mistakes are refused when the file is read, before anything connects: an
unknown key gets a "did you mean", a default that names no declared
connection is an error (never a silent fallback), and every message and
repr has its credentials redacted. This module never reads the
environment; only the CLI does.

It is also where a driver gets what it needs from above the drivers: the
opener of lock stores, which the Kafka driver keeps its leases in, is
handed over here (`open_queue`) rather than imported by the driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import drivers
from .cache.stores import open_cache
from .context import Dependencies
from .drivers import DriverContext, check_driver_name
from .encryption import OPTION as ENCRYPTION
from .encryption import key_ring_from_config
from .environment import ENVIRONMENT_URLS, url_from_environment
from .errors import ConfigurationError, UnknownConnection, UnknownOption
from .interpolation import interpolate, unset_error
from .locks import LockManager
from .manager import QueueManager
from .outbox import DEFAULT_PREFIX as OUTBOX_PREFIX
from .outbox import Outbox
from .queue import Queue
from .redact import redact_url
from .registry import JobRegistry
from .unresolved import UnresolvedQueue
from .worker.settings_table import worker_settings

TOP_LEVEL_KEYS = frozenset(
    {"default", "connections", "locks", "queues", "app", "schedule", "schedules", "dashboard"}
)
CONFIG_FILE = "rainier-queue.toml"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionConfig:
    """One named backend: a URL and the driver's options."""

    name: str
    url: str
    options: Mapping[str, Any] = field(default_factory=dict)
    worker: Mapping[str, Any] = field(default_factory=dict)
    """Settings for a worker on this connection (`WorkerOptions` keyword arguments), from
    the connection's `worker` table; the command line's flags win over them."""
    outbox: str | None = None
    """URL of the SQL database (the application's own) that holds this connection's outbox,
    from the connection's `outbox` key; None without one (docs/outbox.md)."""
    outbox_options: Mapping[str, Any] = field(default_factory=dict)
    """The outbox store's driver options, from an `outbox` table's keys beside `url`."""
    unresolved: str | None = None
    """Why this connection cannot be opened here: the environment variables its table
    names that are not set (None: it can be). Refused when the connection is used."""

    def __repr__(self) -> str:
        url = redact_url(self.url)
        return f"ConnectionConfig({self.name!r}, {url!r}, options={sorted(self.options)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueConfig:
    """The whole queue declaration of an application."""

    default: str
    connections: Mapping[str, ConnectionConfig]
    locks: str | None = None
    """URL of the cache store behind unique jobs (`memory://`, `sqlite:///jobs.db`, ...)."""
    queues: tuple[str, ...] = ()
    """Queues a worker serves when told none, in priority order."""
    app: str | None = None
    """`module:attribute` naming the registry or manager, for the CLI."""
    source: str = "code"
    """Where this came from, for error messages."""
    schedule: str | None = None
    """`module:attribute` naming a `Schedule` in code (or a function returning one), which
    every scheduler command runs beside the `[schedules]` tables (docs/scheduling.md)."""
    schedules: Mapping[str, Any] = field(default_factory=dict)
    """The `[schedules]` tables, as read; checked against the registry by
    `rainier_queue.scheduling.schedule_from_config` when a scheduler starts."""
    dashboard: Mapping[str, Any] = field(default_factory=dict)
    """The `[dashboard]` table, as read: who may open `rainier-queue dashboard` and how it
    is served (docs/dashboard.md); checked by that command."""

    def __post_init__(self) -> None:
        if self.default not in self.connections:
            raise UnknownConnection(self.default, self.connections)

    @classmethod
    def from_url(cls, url: str, *, locks: str | None = None, **options: Any) -> QueueConfig:
        """A single connection named `default`."""
        conn = ConnectionConfig(name="default", url=url, options=options)
        return cls(default="default", connections={"default": conn}, locks=locks)

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any],
        *,
        source: str = "config",
        unresolved: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> QueueConfig:
        """Read a declaration (the shape of the TOML table above), refusing anything unknown.

        `unresolved` names the connections whose environment variables are not
        set, each with the message saying which; they are kept, and refused
        when used. `environ` is where a connection that names its `driver`
        and leaves its `url` out finds the URL (`REDIS_URL`, `KAFKA_BROKERS`:
        `environment.py`).
        """
        unresolved = unresolved or {}
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                raise UnknownOption(f"the queue config ({source})", key, TOP_LEVEL_KEYS)
        raw = data.get("connections")
        if not isinstance(raw, Mapping) or not raw:
            raise ConfigurationError(
                f"the queue config ({source}) declares no connections; add one, for example "
                '[connections.main] url = "sqlite:///jobs.db"'
            )
        connections = {
            name: _connection(name, value, source, unresolved.get(name), environ)
            for name, value in raw.items()
        }
        default = data.get("default")
        if default is None:
            if len(connections) != 1:
                raise ConfigurationError(
                    f"the queue config ({source}) declares several connections; "
                    "say which one is the `default`"
                )
            default = next(iter(connections))
        queues = data.get("queues", ())
        if isinstance(queues, str):
            queues = queues.split(",")
        if not isinstance(queues, list | tuple) or not all(isinstance(q, str) for q in queues):
            raise ConfigurationError(f"`queues` ({source}) must be a list of queue names")
        return cls(
            default=str(default),
            connections=connections,
            locks=_optional_str(data, "locks", source),
            queues=tuple(q.strip() for q in queues if q.strip()),
            app=_optional_str(data, "app", source),
            schedule=_optional_str(data, "schedule", source),
            source=source,
            schedules=_schedules(data, source),
            dashboard=_table(data, "dashboard", source),
        )

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        *,
        start: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> QueueConfig | None:
        """Read `path`, or find `rainier-queue.toml` / `pyproject.toml` from `start` upwards.

        `${NAME}` in the file's strings is replaced from `environ` (pass
        `os.environ`; the library never reads the environment itself), so
        credentials stay out of `pyproject.toml`. Returns None when no file
        declares a queue config.
        """
        if path is not None:
            file = Path(path)
            if not file.is_file():
                raise ConfigurationError(f"no queue config file at {file}")
            return cls._read(file, required=True, environ=environ)
        here = (start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            for candidate in (folder / CONFIG_FILE, folder / "pyproject.toml"):
                if candidate.is_file():
                    found = cls._read(candidate, required=False, environ=environ)
                    if found is not None:
                        return found
        return None

    @staticmethod
    def declared_near(start: Path | None = None) -> tuple[Path, list[str]] | None:
        """The file `load(start=...)` would read, and the connections it names, unchecked.

        For a caller that has its connections from elsewhere (the CLI, given
        `RAINIER_QUEUE_URL`) and must not let either source win silently. Reads
        no variable and builds nothing; a file that cannot be read names none.
        """
        import tomllib

        here = (start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            for candidate in (folder / CONFIG_FILE, folder / "pyproject.toml"):
                if not candidate.is_file():
                    continue
                try:
                    data = tomllib.loads(candidate.read_text(encoding="utf-8"))
                except (OSError, tomllib.TOMLDecodeError):
                    return candidate, []
                if candidate.name == "pyproject.toml":
                    data = data.get("tool", {}).get("rainier-queue")
                    if not isinstance(data, dict):
                        continue
                declared = data.get("connections")
                return candidate, sorted(declared) if isinstance(declared, Mapping) else []
        return None

    @classmethod
    def _read(
        cls, file: Path, *, required: bool, environ: Mapping[str, str] | None
    ) -> QueueConfig | None:
        import tomllib  # here: a process given its URL never reads a file, nor loads the parser

        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigurationError(f"cannot read {file}: {exc}") from exc
        if file.name == "pyproject.toml":
            data = data.get("tool", {}).get("rainier-queue")
            if data is None:
                if required:
                    raise ConfigurationError(f"{file} has no [tool.rainier-queue] table")
                return None
        data, unresolved = _interpolated(data, environ, str(file))
        config = cls.from_mapping(data, source=str(file), unresolved=unresolved, environ=environ)
        return config.anchored(file.resolve().parent)

    def anchored(self, folder: Path) -> QueueConfig:
        """This config with each relative `sqlite:///` URL made absolute against `folder`.

        A config file is read by a dispatcher in one folder and a worker in
        another, so a path relative to each one's working directory named
        two files, and the worker waited on an empty queue. Read from a file,
        `sqlite:///jobs.db` therefore means `jobs.db` beside that file; a URL
        given on the command line or in code keeps meaning the working
        directory, as a shell user expects.
        """
        connections = {
            name: dataclasses.replace(
                conn,
                url=_anchored(conn.url, folder),
                outbox=None if conn.outbox is None else _anchored(conn.outbox, folder),
                options=_anchored_options(conn.options, folder),
            )
            for name, conn in self.connections.items()
        }
        locks = None if self.locks is None else _anchored(self.locks, folder)
        return dataclasses.replace(self, connections=connections, locks=locks)

    def open(self, name: str, context: DriverContext | None = None) -> Queue:
        """Build the queue for connection `name`."""
        conn = self.connections.get(name)
        if conn is None:
            raise UnknownConnection(name, self.connections)
        if conn.unresolved is not None:
            raise UnresolvedQueue(name, conn.unresolved).error()
        try:
            return open_queue(conn.url, conn.options, context)
        except ConfigurationError as exc:
            # Same exception, its message prefixed: its class still says what
            # went wrong (a missing extra, an unknown option) to code that asks.
            exc.args = (f"queue connection `{name}`: {exc}", *exc.args[1:])
            raise

    def open_outbox(self, name: str, context: DriverContext | None = None) -> Outbox | None:
        """The outbox of connection `name` (its store opened, not yet connected), or None."""
        conn = self.connections.get(name)
        if conn is None:
            raise UnknownConnection(name, self.connections)
        if conn.outbox is None or conn.unresolved is not None:
            return None
        options = dict(conn.outbox_options)
        if "prefix" not in options and "prefix=" not in urlsplit(conn.outbox).query:
            options["prefix"] = OUTBOX_PREFIX
        try:
            store = open_queue(conn.outbox, options, context)
        except ConfigurationError as exc:
            exc.args = (f"the outbox of connection `{name}`: {exc}", *exc.args[1:])
            raise
        encryption = conn.options.get(ENCRYPTION)
        keys = None if encryption is None else key_ring_from_config(encryption)
        return Outbox(store, target=name, keys=keys)

    def build(
        self,
        registry: JobRegistry | None = None,
        dependencies: Dependencies | None = None,
    ) -> QueueManager:
        """Open every connection and return a manager over them."""
        registry = registry if registry is not None else JobRegistry()
        context = DriverContext(
            registry=registry, dependencies=dependencies or Dependencies(), open_cache=open_cache
        )
        queues = {
            name: UnresolvedQueue(name, conn.unresolved)
            if conn.unresolved is not None
            else self.open(name, context)
            for name, conn in sorted(self.connections.items())
        }
        locks = LockManager(open_cache(self.locks)) if self.locks else None
        outboxes = {
            name: outbox
            for name in sorted(self.connections)
            if (outbox := self.open_outbox(name, context)) is not None
        }
        return QueueManager(
            queues[self.default],
            registry=registry,
            connections=queues,
            default_connection=self.default,
            locks=locks,
            default_queues=self.queues,
            dependencies=context.dependencies,
            outboxes=outboxes,
        )

    def __repr__(self) -> str:
        locks = redact_url(self.locks) if self.locks else None
        conns = list(self.connections.values())
        return f"QueueConfig(default={self.default!r}, connections={conns}, locks={locks!r})"


def open_queue(
    url: str, options: Mapping[str, Any] | None = None, context: DriverContext | None = None
) -> Queue:
    """`drivers.open_queue`, with what the connection layer hands every driver.

    That is the opener of lock stores (`cache.stores.open_cache`), unless the
    context brings its own, and the `encryption` option: the key ring every
    push to this queue seals payloads with (docs/encryption.md), which no
    driver sees. Prefer this to `drivers.open_queue` in
    application code: it opens a Kafka queue too.
    """
    context = context or DriverContext()
    if context.open_cache is None:
        context = replace(context, open_cache=open_cache)
    options = dict(options or {})
    encryption = options.pop(ENCRYPTION, None)
    keys = None if encryption is None else key_ring_from_config(encryption)
    queue = drivers.open_queue(url, options, context)
    if keys is not None:
        if not queue.capabilities.deferred:
            raise ConfigurationError(
                f"the {queue.name} driver runs each job inside its push and stores nothing, so "
                "it has no payload to encrypt: remove `encryption` from this connection"
            )
        queue.payload_keys = keys
    return queue


def _interpolated(
    data: Any, environ: Mapping[str, str] | None, source: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """`data` with its variables replaced, and the connections whose variables are not set.

    Everything outside `connections` is used by every command, so a variable
    missing there is an error now; a connection's own table waits until the
    connection is used (see `unresolved.py`).
    """
    if not isinstance(data, Mapping):
        return interpolate(data, environ, source=source), {}
    rest = {key: value for key, value in data.items() if key != "connections"}
    done: dict[str, Any] = interpolate(rest, environ, source=source)
    raw = data.get("connections")
    if not isinstance(raw, Mapping):
        if "connections" in data:
            done["connections"] = raw
        return done, {}
    connections: dict[str, Any] = {}
    unresolved: dict[str, str] = {}
    for name, value in raw.items():
        unset: list[str] = []
        connections[name] = interpolate(value, environ, source=source, unset=unset)
        if unset:
            unresolved[name] = unset_error(unset, source, environ_given=environ is not None)
    done["connections"] = connections
    return done, unresolved


def _connection(
    name: str,
    value: Any,
    source: str,
    unresolved: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ConnectionConfig:
    if isinstance(value, str):
        return ConnectionConfig(name=name, url=value, unresolved=unresolved)
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"connection `{name}` ({source}) must be a URL or a table with `url`"
        )
    where = f"connection `{name}` ({source})"
    driver = value.get("driver")
    if driver is not None and not isinstance(driver, str):
        raise ConfigurationError(f"{where}: `driver` must be a string")
    url = value.get("url")
    if url is None and driver is not None and unresolved is None:
        url, unresolved = url_from_environment(driver, environ, where=where)
    if url is None and driver is None:
        raise ConfigurationError(
            f'{where} needs a `url`, such as "sqlite:///jobs.db" (or a `driver` whose URL '
            f"comes from the environment: {_environment_drivers()})"
        )
    if url is not None and not isinstance(url, str):
        raise ConfigurationError(f'{where}: `url` must be a string, such as "sqlite:///jobs.db"')
    if unresolved is not None:
        # Its values wait for their variables; it is checked when they are set.
        return ConnectionConfig(name=name, url=url or f"{driver}://", unresolved=unresolved)
    assert url is not None
    if "queue" in value:
        raise ConfigurationError(
            f"{where}: a connection does not name a `queue`; "
            "jobs choose their queue (or dispatch with .on_queue())"
        )
    if driver is not None:
        check_driver_name(driver, url, where=where)
    worker = value.get("worker", {})
    if not isinstance(worker, Mapping):
        raise ConfigurationError(
            f"{where}: `worker` must be a table, such as "
            f"[connections.{name}.worker] concurrency = 8"
        )
    settings = worker_settings(
        worker, where=f"the worker settings of connection `{name}` ({source})"
    )
    outbox, outbox_options = _outbox(name, value.get("outbox"), source)
    options = {k: v for k, v in value.items() if k not in ("url", "driver", "worker", "outbox")}
    return ConnectionConfig(
        name=name,
        url=url,
        options=options,
        worker=settings,
        outbox=outbox,
        outbox_options=outbox_options,
    )


def _outbox(name: str, value: Any, source: str) -> tuple[str | None, dict[str, Any]]:
    """A connection's `outbox` key: a URL, or a table with `url` and the store's options."""
    if value is None:
        return None, {}
    if isinstance(value, str):
        return value, {}
    if isinstance(value, Mapping) and isinstance(value.get("url"), str):
        return value["url"], {k: v for k, v in value.items() if k != "url"}
    raise ConfigurationError(
        f"connection `{name}` ({source}): `outbox` must be the URL of the application's "
        'database, such as outbox = "postgresql://app@db/app", or a table with `url`'
    )


def _environment_drivers() -> str:
    return ", ".join(
        f'driver = "{driver}" reads {found.variable}' for driver, found in ENVIRONMENT_URLS.items()
    )


def _anchored(url: str, folder: Path) -> str:
    """`url` with a relative SQLite path made absolute against `folder`; others unchanged."""
    scheme, sep, rest = url.partition(":///")
    if scheme.lower() != "sqlite" or not sep or rest.startswith(("/", "~")) or not rest:
        return url
    return f"{scheme}:///{folder / rest}"


def _anchored_options(options: Mapping[str, Any], folder: Path) -> Mapping[str, Any]:
    """A connection's options with its `locks` store (a URL) anchored as its own URL is."""
    locks = options.get("locks")
    if not isinstance(locks, str):
        return options
    return {**options, "locks": _anchored(locks, folder)}


def _schedules(data: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    value = data.get("schedules", {})
    if isinstance(value, str) and ":" in value:
        raise ConfigurationError(
            f"`schedules` ({source}) holds [schedules.NAME] tables; to name a Schedule in "
            f'code, write `schedule = "{value}"` (singular)'
        )
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"`schedules` ({source}) must be a table of schedules, one [schedules.NAME] each"
        )
    return dict(value)


def _table(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"`{key}` ({source}) must be a table: [{key}]")
    return dict(value)


def _optional_str(data: Mapping[str, Any], key: str, source: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"`{key}` ({source}) must be a string")
    return value
