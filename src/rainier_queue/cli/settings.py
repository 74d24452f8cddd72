# SPDX-License-Identifier: MIT
"""What the command line was told, from its flags and the environment.

The library never reads the environment (DESIGN decision 8), and inside
the CLI only this module does, so there is one place that says which
variable means what and how it ranks against a flag:

| Variable | Flag | Meaning |
|---|---|---|
| `RAINIER_QUEUE_APP` | `--app` | `module:attribute`: a registry, a manager, or a factory |
| `RAINIER_QUEUE_URL` | `--url` | one connection, named `default`, from a URL |
| `RAINIER_QUEUE_CONFIG` | `--config` | a `rainier-queue.toml` or `pyproject.toml` to read |
| `RAINIER_QUEUE_CONNECTION` | `--connection` | which declared connection a command works on |
| `RAINIER_QUEUE_EVENT_LOOP` | `--event-loop` | `auto` (uvloop if there), `asyncio`, `uvloop` |

A flag always beats its variable. `--url` and `--config` are two ways of
saying where the queues are, so they rank as a pair: if either is given as
a flag, both variables are ignored, and giving both flags (or both
variables) is refused rather than silently resolved. So is
`RAINIER_QUEUE_URL` beside a config file that declares connections, found
from the working directory (`loading.py` refuses it, naming both).

The variables a connection table's URL may come from (`REDIS_URL`,
`KAFKA_BROKERS`) are not read here: the whole environment is handed to the
config, which reads them (`rainier_queue.environment`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigurationError
from ..redact import redact_url
from .event_loop import CHOICES as LOOPS

APP_VAR = "RAINIER_QUEUE_APP"
URL_VAR = "RAINIER_QUEUE_URL"
CONFIG_VAR = "RAINIER_QUEUE_CONFIG"
CONNECTION_VAR = "RAINIER_QUEUE_CONNECTION"
EVENT_LOOP_VAR = "RAINIER_QUEUE_EVENT_LOOP"
KEYS_VAR = "RAINIER_QUEUE_ENCRYPTION_KEYS"
"""The key ring (`id:key` pairs) of a connection given by `--url`, which has no config table to
hold its `encryption` option (docs/encryption.md); a config file names its own variables."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The resolved global options; `*_from` say where each came from, for messages."""

    app: str | None = None
    app_from: str = ""
    url: str | None = None
    config: Path | None = None
    source_from: str = ""
    """Where `url` or `config` came from (`--url`, `RAINIER_QUEUE_CONFIG`, ...)."""
    connection: str | None = None
    verbose: int = 0
    quiet: bool = False
    event_loop: str = "auto"
    """`auto`, `asyncio` or `uvloop` (see `event_loop.py`)."""
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The environment `${NAME}` in a config file is read from (never shown: it holds secrets)."""

    @classmethod
    def resolve(
        cls,
        *,
        app: str | None = None,
        url: str | None = None,
        config: str | Path | None = None,
        connection: str | None = None,
        verbose: int = 0,
        quiet: bool = False,
        event_loop: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Combine flags (None when not given) with the environment (`os.environ` by default)."""
        env = os.environ if environ is None else environ
        app_value, app_from = _pick(app, "--app", env, APP_VAR)
        connection_value, _ = _pick(connection, "--connection", env, CONNECTION_VAR)
        loop_value, loop_from = _pick(event_loop, "--event-loop", env, EVENT_LOOP_VAR)
        if loop_value is not None and loop_value not in LOOPS:
            raise ConfigurationError(
                f"{loop_from} names no event loop ({loop_value!r}); use one of {', '.join(LOOPS)}"
            )
        if url is not None or config is not None:
            url_value, config_value = url, config
            names = ("--url", "--config")
        else:
            url_value, config_value = _blank(env.get(URL_VAR)), _blank(env.get(CONFIG_VAR))
            names = (URL_VAR, CONFIG_VAR)
        if url_value is not None and config_value is not None:
            raise ConfigurationError(
                f"both {names[0]} ({redact_url(url_value)}) and {names[1]} ({config_value}) say "
                f"where the queues are; give one of them"
            )
        if url_value is not None:
            source_from = names[0]
        elif config_value is not None:
            source_from = names[1]
        else:
            source_from = ""
        return cls(
            app=app_value,
            app_from=app_from,
            url=url_value,
            config=Path(config_value) if config_value is not None else None,
            source_from=source_from,
            connection=connection_value,
            verbose=verbose,
            quiet=quiet,
            event_loop=loop_value or "auto",
            environ=dict(env),
        )


def _pick(
    flag: str | None, flag_name: str, env: Mapping[str, str], var: str
) -> tuple[str | None, str]:
    if flag is not None:
        return flag, flag_name
    value = _blank(env.get(var))
    return value, var if value is not None else ""


def _blank(value: str | None) -> str | None:
    """An empty variable counts as unset, as a shell user expects."""
    if value is None or not value.strip():
        return None
    return value.strip()


__all__ = ["APP_VAR", "CONFIG_VAR", "CONNECTION_VAR", "KEYS_VAR", "URL_VAR", "Settings"]
