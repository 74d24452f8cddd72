# SPDX-License-Identifier: MIT
"""Finding the application's jobs and queues from what the command line was told.

A worker started from a shell knows nothing but strings, so two questions
have to be answered from them, each with one clear rule and a message that
says what to do when it cannot be:

*Which jobs?* `--app module:attribute` (or `RAINIER_QUEUE_APP`, or `app` in
the config file) names a `JobRegistry`, a `QueueManager`, or a function
taking no arguments that returns either (it may be `async`). The working
directory is put on `sys.path` first, so `--app examples.quickstart.jobs:registry`
works from the project folder as it would in `python -c`. The module may
also be given as a file, `--app ./jobs.py:registry`, as a user who has just
written one tends to.

*Which queues?* In this order, first found wins:

1. `--url` or `--config` (or their variables): one URL, or a config file;
   the app then only brings its registry (`RAINIER_QUEUE_URL` beside a
   config file of 3. that declares connections is refused: both say where
   the queues are);
2. an app that is a `QueueManager`: its own connections, locks and queues;
3. a `rainier-queue.toml`, or `[tool.rainier-queue]` in `pyproject.toml`,
   found from the working directory upwards.

Nothing else. There is no implicit `localhost` or default file: a worker
that silently opened an empty queue of its own would wait for ever for
jobs dispatched elsewhere, so with none of the above the command stops and
says how to give one.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from ..connections import QueueConfig
from ..manager import QueueManager
from ..queue import Queue
from ..redact import redact_url
from ..registry import JobRegistry
from ..unresolved import UnresolvedQueue
from .output import Problem
from .settings import APP_VAR, CONFIG_VAR, KEYS_VAR, URL_VAR, Settings

NO_QUEUES = (
    "no queue connection is configured. Say where the jobs are with --url "
    f"(for example --url sqlite:///jobs.db, or set {URL_VAR}), with --config FILE (or set "
    f"{CONFIG_VAR}), or declare them in a rainier-queue.toml or a [tool.rainier-queue] "
    "table in pyproject.toml; an --app that names a QueueManager brings its own"
)


@dataclass(frozen=True, slots=True)
class App:
    """What `--app` named: a registry, and the manager if it was one."""

    spec: str
    registry: JobRegistry
    manager: QueueManager | None = None


@dataclass(slots=True)
class Loaded:
    """An open manager, and how it was found (for messages and `doctor`)."""

    manager: QueueManager
    registry: JobRegistry
    app: App | None
    source: str
    """Where the connections came from, credential-free: `--url sqlite:///jobs.db`, ..."""
    schedules: Mapping[str, Any] = field(default_factory=dict)
    """The config file's `[schedules]` tables, unchecked (see `cli.schedule`)."""
    schedules_source: str = "config"
    schedule: str | None = None
    """`schedule = "module:attribute"` in the config: the Schedule in code every scheduler
    command loads unless `--schedule` names another."""
    urls: Mapping[str, str] = field(default_factory=dict)
    """Each configured connection's URL, where the connections came from a config or --url
    (the scheduler opens its claim store on it when no `locks` store is configured)."""
    config: QueueConfig | None = None
    """The declaration the connections were built from (None for a QueueManager app)."""
    dashboard: Mapping[str, Any] = field(default_factory=dict)
    """The config's `[dashboard]` table, unchecked (see `cli.dashboard`)."""

    def worker_settings(self, connection: str | None) -> dict[str, Any]:
        """The `worker` table of `connection` in the config, as `WorkerOptions` arguments."""
        if self.config is None:
            return {}
        declared = self.config.connections.get(self.connection_name(connection))
        return dict(declared.worker) if declared is not None else {}

    def queue(self, connection: str | None) -> Queue:
        """The queue of connection `connection` (the default one when None).

        A declared connection whose environment variables are not set is
        refused here, naming them, before the command does anything with it.
        """
        queue = self.manager.connection(connection)
        if isinstance(queue, UnresolvedQueue):
            raise queue.error()
        return queue

    def connection_name(self, connection: str | None) -> str:
        """The name a command's connection goes by in messages."""
        return connection if connection is not None else self.manager.default_connection


async def open_application(settings: Settings) -> Loaded:
    """The manager and registry the command works with. Close `manager` when done."""
    _refuse_two_sources(settings)
    explicit = _explicit_config(settings)
    config = explicit
    discovered = False
    if config is None:
        config = QueueConfig.load(start=Path.cwd(), environ=settings.environ)
        discovered = config is not None
    spec, origin = settings.app, settings.app_from
    if spec is None and config is not None and config.app is not None:
        spec, origin = config.app, f"`app` in {config.source}"
    app = await load_app(spec, origin=origin) if spec is not None else None
    if app is not None and app.manager is not None and explicit is None:
        source = f"the QueueManager {app.spec} (from {origin})"
        return Loaded(
            manager=app.manager,
            registry=app.registry,
            app=app,
            source=source,
            schedules=config.schedules if config is not None else {},
            schedules_source=config.source if config is not None else "config",
            dashboard=config.dashboard if config is not None else {},
            schedule=config.schedule if config is not None else None,
        )
    if config is None:
        raise Problem(NO_QUEUES)
    if app is not None and app.manager is not None:
        await app.manager.aclose()
    registry = app.registry if app is not None else JobRegistry()
    manager = config.build(registry)
    if settings.url is not None:
        source = f"{settings.source_from} {redact_url(settings.url)}"
    elif discovered:
        source = f"the config {config.source}"
    else:
        source = f"{settings.source_from} {config.source}"
    return Loaded(
        manager=manager,
        registry=registry,
        app=app,
        source=source,
        schedules=config.schedules,
        schedules_source=config.source,
        dashboard=config.dashboard,
        schedule=config.schedule,
        urls={name: conn.url for name, conn in config.connections.items()},
        config=config,
    )


def _refuse_two_sources(settings: Settings) -> None:
    """Refuse `RAINIER_QUEUE_URL` beside a config file that declares connections.

    Both say where the queues are. The variable used to win without a word,
    so a worker started with it in its environment served another queue
    than the file beside it declared, and the jobs dispatched through the
    file waited for ever. A flag (`--url`, `--config`) is a choice made on
    the command line, so it still wins; a file that declares no connections
    (only `app`, say) is no second source.
    """
    if settings.url is None or settings.source_from != URL_VAR:
        return
    found = QueueConfig.declared_near(Path.cwd())
    if found is None or not found[1]:
        return
    file, names = found
    listed = ", ".join(f"`{name}`" for name in names)
    raise Problem(
        f"{URL_VAR} ({redact_url(settings.url)}) and {file} (connections {listed}) both say "
        "where the queues are, and neither wins silently. Unset "
        f"{URL_VAR} to use the file, or choose on the command line: --url URL for the "
        f"URL, or --config {file} for the file"
    )


def _explicit_config(settings: Settings) -> QueueConfig | None:
    if settings.url is not None:
        keys = settings.environ.get(KEYS_VAR, "").strip()
        return QueueConfig.from_url(settings.url, **({"encryption": keys} if keys else {}))
    if settings.config is not None:
        found = QueueConfig.load(settings.config, environ=settings.environ)
        if found is None:  # pragma: no cover - load(path) raises instead
            raise Problem(f"{settings.config} declares no queue config")
        return found
    return None


async def load_app(spec: str, *, origin: str = "--app") -> App:
    """Import `module:attribute` and make a registry (and maybe a manager) of it."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise Problem(
            f"{origin} takes `module:attribute`, such as `myapp.jobs:registry`; got `{spec}`"
        )
    _put_cwd_on_path()
    try:
        if _is_file_path(module_name):
            module = _import_file(module_name, origin)
            module_name = Path(module_name).stem
        else:
            module = importlib.import_module(module_name)
    except Problem:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise Problem(
                f"cannot import `{module_name}` (from {origin}): there is no module named "
                f"`{exc.name}` here. Run from the folder that holds it, or add that folder to "
                "PYTHONPATH",
                cause=exc,
            ) from exc
        raise _import_failed(module_name, origin, exc) from exc
    except Exception as exc:
        raise _import_failed(module_name, origin, exc) from exc
    target: object = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise Problem(
                f"`{module_name}` has no attribute `{attr_path}` (from {origin})"
                + _candidates(module)
            )
        target = getattr(target, part)
    if not isinstance(target, JobRegistry | QueueManager) and callable(target):
        _check_factory(spec, origin, target, module)
        factory = cast(Callable[[], object], target)
        try:
            target = factory()
            if inspect.isawaitable(target):
                target = await target
        except Exception as exc:
            raise Problem(
                f"calling `{spec}` (from {origin}) failed: {type(exc).__name__}: {exc}", cause=exc
            ) from exc
    if isinstance(target, QueueManager):
        return App(spec=spec, registry=target.registry, manager=target)
    if isinstance(target, JobRegistry):
        return App(spec=spec, registry=target)
    raise Problem(
        f"`{spec}` (from {origin}) is a {type(target).__name__}; it must be a JobRegistry, a "
        "QueueManager, or a function taking no arguments that returns one"
    )


def _is_file_path(module: str) -> bool:
    """Whether `--app` gave a file (`./jobs.py`, `app/jobs.py`) rather than a module name."""
    return module.endswith(".py") or "/" in module or os.sep in module


def _import_file(path_text: str, origin: str) -> ModuleType:
    """Import the Python file at `path_text` as a module named after it.

    Its folder goes on `sys.path` first, so the file can import its
    neighbours as it would when run with `python path/to/file.py`.
    """
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise Problem(
            f"{origin} names the file `{path_text}`, which does not exist (looked for {path})"
        )
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise Problem(f"{origin}: `{path_text}` cannot be imported as Python; name a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _check_factory(spec: str, origin: str, target: object, module: ModuleType) -> None:
    """Refuse, before calling it, anything `--app` names that is not a factory of no arguments.

    A job class or a job function is callable too, and calling it with no
    arguments failed deep inside the job with a `TypeError` that said nothing
    about `--app`.
    """
    what = None
    if isinstance(target, type):
        what = f"the class `{target.__name__}`"
    else:
        try:
            signature = inspect.signature(cast(Callable[..., object], target))
        except (TypeError, ValueError):
            return
        required = [
            p.name
            for p in signature.parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            what = f"a function that needs arguments ({', '.join(required)})"
    if what is not None:
        raise Problem(
            f"`{spec}` (from {origin}) names {what}; --app must name the JobRegistry that holds "
            "your jobs, a QueueManager, or a function taking no arguments that returns one"
            + _candidates(module)
        )


def _put_cwd_on_path() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _import_failed(module: str, origin: str, exc: BaseException) -> Problem:
    return Problem(
        f"importing `{module}` (from {origin}) failed: {type(exc).__name__}: {exc} "
        "(run with -v for the traceback)",
        cause=exc,
    )


def _candidates(module: object) -> str:
    names = sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, JobRegistry | QueueManager)
    )
    if not names:
        return "; it defines no JobRegistry or QueueManager"
    listed = ", ".join(f"`{n}`" for n in names)
    return f"; it has {listed}"


__all__ = ["APP_VAR", "NO_QUEUES", "App", "Loaded", "load_app", "open_application"]
