# SPDX-License-Identifier: MIT
"""Running one adapter, ours or a peer's, in the venv it needs, and reading back its result.

The peers must never be imported into the project's venv (their pins would
fight ours), so each run is a subprocess of the right interpreter: ours in
the project's venv, the peers in bench/.peers-venv, which is created and
filled from the pinned requirements-peers.txt on first use. An adapter
prints one JSON line; anything else is a FAILED run.
"""

from __future__ import annotations

import compileall
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from .constants import OURS, ROOT
from .modes import mode_of
from .peers._common import MODE_ENV

HERE = Path(__file__).resolve().parent
PEERS_VENV = ROOT / "bench" / ".peers-venv"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
REQUIREMENTS = HERE / "requirements-peers.txt"
STAMP = PEERS_VENV / ".requirements.sha256"

console = Console(width=max(Console().width, 120))  # tables stay readable in a log


def ensure_peers_venv() -> None:
    """Create bench/.peers-venv and install the pinned peers, unless already done."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        return
    if not PEERS_PYTHON.exists():
        console.print(f"creating {PEERS_VENV.relative_to(ROOT)}")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(PEERS_VENV)], check=True)
    console.print(f"installing {REQUIREMENTS.relative_to(ROOT)} into the peers venv")
    subprocess.run(
        [str(PEERS_PYTHON), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True
    )
    STAMP.write_text(digest + "\n")


def compile_bytecode() -> None:
    """Compile the project's sources and the bench's modules to bytecode before any run.

    pip compiles every package it installs, so each peer's worker starts from
    bytecode. The project is installed editable, and where the environment
    sets PYTHONDONTWRITEBYTECODE (this machine does) nothing ever writes its
    bytecode: each of our worker processes would compile the package again at
    start, about 0.15 s of CPU that no peer pays. Compiling once here puts
    every system on the same footing; it changes nothing a worker does.
    """
    for folder in (ROOT / "src" / "rainier_queue", ROOT / "bench"):
        compileall.compile_dir(folder, quiet=1, force=False)


def python_for(system: str) -> str:
    return sys.executable if system == OURS else str(PEERS_PYTHON)


def adapter_env(tag: str, backend: str, system: str = "") -> dict[str, str]:
    """The adapter's environment: the run's tag, its backend and the peer's mode, if it has one."""
    env = {**os.environ, "RQCOMPARE_TAG": tag, "RQCOMPARE_BACKEND": backend}
    env[MODE_ENV] = mode_of(system)
    return env


_available: dict[tuple[str, str, str], str | None] = {}


def available(system: str, backend: str, module: str) -> str | None:
    """None if the adapter can be imported by its venv, else why not (asked once per run)."""
    key = (system, backend, module)
    if key not in _available:
        _available[key] = _probe(system, backend, module)
    return _available[key]


def _probe(system: str, backend: str, module: str) -> str | None:
    path = ROOT / Path(*module.split(".")).with_suffix(".py")
    if not path.exists():
        return "no adapter"
    probe = subprocess.run(
        [python_for(system), "-c", f"import {module}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=adapter_env("probe", backend, system),
    )
    if probe.returncode:
        return (probe.stderr.strip().splitlines() or ["import failed"])[-1]
    return None


def run_adapter(
    system: str,
    backend: str,
    module: str,
    *,
    jobs: int,
    processes: int,
    concurrency: int,
    timeout: float,
    workload: str = "throughput",
    rate: float = 50.0,
    sleep_ms: float = 0.0,
    enqueue: str = "push_many",
) -> dict[str, Any]:
    """One run of one adapter in its own subprocess; its JSON result."""
    tag = secrets.token_hex(4)
    command = [
        *(python_for(system), "-m", module, "--jobs", str(jobs)),
        *("--processes", str(processes), "--concurrency", str(concurrency)),
        *("--tag", tag, "--timeout", str(timeout), "--backend", backend),
        *("--workload", workload),
    ]
    if workload == "memory":
        command.append("--rss")
    if workload == "latency":
        command += ["--rate", str(rate)]
    if sleep_ms:
        command += ["--sleep-ms", str(sleep_ms)]
    if enqueue != "push_many":
        command += ["--enqueue", enqueue]
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env=adapter_env(tag, backend, system)
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        result = {"ok": False, "error": f"adapter exited {proc.returncode} without a result"}
    if not result.get("ok"):
        console.print(f"[red]{system} ({backend}) FAILED[/red]: {result.get('error')}")
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        if tail:
            console.print(tail, markup=False, highlight=False)
    return result


def draw_chart(result: dict[str, Any], path: Path) -> bool:
    """Draw the PNG with the peers' venv (matplotlib lives there); False if it could not."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(result, handle)
    try:
        proc = subprocess.run(
            [str(PEERS_PYTHON), "-m", "bench.compare.chart", handle.name, str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(handle.name)
    if proc.returncode:
        console.print(f"[yellow]no chart[/yellow]: {proc.stderr.strip()[-500:]}")
        return False
    return True
