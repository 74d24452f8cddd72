# SPDX-License-Identifier: MIT
"""Without its extra, a telemetry flag is refused with the `pip install` that fixes it.

The dev environment has both extras, so their absence is made for the one
worker process: a folder first on its path whose `prometheus_client` (or
`opentelemetry`) fails to import, as the missing package would.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rainier_queue.cli.exit_codes import ExitCode

from ..cli.harness import ROOT, clean_env, run

APP = "tests.telemetry.metrics_app:registry"


def without(tmp_path: Path, package: str) -> dict[str, str]:
    """An environment in which `package` cannot be imported."""
    folder = tmp_path / "hidden" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(f"raise ImportError('no module named {package}')\n")
    path = os.pathsep.join([str(tmp_path / "hidden"), str(ROOT)])
    return clean_env(PYTHONPATH=path)


@pytest.mark.parametrize(
    ("flags", "package", "extra"),
    [
        (["--metrics-port", "0"], "prometheus_client", "prometheus"),
        (["--tracing"], "opentelemetry", "otel"),
    ],
)
def test_a_flag_without_its_extra_names_the_extra_to_install(
    tmp_path: Path, flags: list[str], package: str, extra: str
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    done = run(
        "--app", APP, "--url", url, "work", "--stop-when-empty", *flags,
        env=without(tmp_path, package),
    )  # fmt: skip
    assert done.code == ExitCode.USAGE
    assert f"pip install 'rainier-queue[{extra}]'" in done.stderr
    assert flags[0] in done.stderr


def test_tracing_without_an_sdk_configured_works_the_jobs(tmp_path: Path) -> None:
    """The API alone is a no-op tracer: `--tracing` costs the application nothing it did not
    configure, and changes no outcome."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert run("--app", APP, "--url", url, "dispatch", "fine").code == ExitCode.OK
    done = run("--app", APP, "--url", url, "work", "--stop-when-empty", "--tracing")
    assert done.code == ExitCode.OK, done.output
    assert "succeeded 1, retried 0, failed 0" in done.stdout
