# SPDX-License-Identifier: MIT
"""`docs/architecture.md`'s checklist for a driver's author, held against the tree.

The checklist says what a new driver brings with it; these tests read the
tree and the registry and fail, naming what is missing, for any driver that
does not bring it. So the list cannot drift from what the code needs.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from rainier_queue.drivers import _SCHEMES
from rainier_queue.queue import Capabilities, Provisionable, Queue

from ..contract.backends import BACKENDS

ROOT = Path(__file__).resolve().parents[2]

WITHOUT_CONTRACT_BACKEND = {
    "rainier_queue.drivers.inline": "runs the job inside dispatch: nothing is reserved, so "
    "tests/contract/test_inline.py holds it to what it does instead",
}
"""Drivers the reserve-and-settle contract suite does not open, and why."""

SERVER_FREE = {"rainier_queue.drivers.memory", "rainier_queue.drivers.inline"}
"""Drivers with nothing to choose against (no server, no file): no cost paragraph needed."""


def _built() -> dict[str, type[Queue]]:
    """Every registered driver whose module exists in this version, by module."""
    found: dict[str, type[Queue]] = {}
    for entry in _SCHEMES.values():
        try:
            module = importlib.import_module(entry.module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and exc.name.startswith("rainier_queue"):
                continue  # announced, not built yet (the registry says "not available")
            raise
        found[entry.module] = getattr(module, entry.attr)
    return found


BUILT = _built()


@pytest.mark.parametrize("module", sorted(BUILT))
def test_every_driver_declares_its_name_capabilities_and_options(module: str) -> None:
    driver = BUILT[module]
    assert issubclass(driver, Queue)
    assert isinstance(driver.name, str)
    assert driver.name
    assert isinstance(driver.capabilities, Capabilities)
    assert isinstance(getattr(driver, "OPTIONS", None), frozenset), f"{module}: no OPTIONS"


@pytest.mark.parametrize("module", sorted(BUILT))
def test_a_driver_whose_push_makes_nothing_can_provision_what_its_queues_need(
    module: str,
) -> None:
    driver = BUILT[module]
    if driver.capabilities.push_creates_resources:
        return
    assert issubclass(driver, Provisionable), (
        f"{module}: a push to a queue nothing provisioned is refused "
        "(push_creates_resources=False), and nothing provisions it: write `provision` "
        "and `check_provisioned` (docs/architecture.md, the provisioning seam)"
    )


@pytest.mark.parametrize("module", sorted(set(BUILT) - SERVER_FREE))
def test_every_driver_module_says_what_choosing_it_costs(module: str) -> None:
    doc = importlib.import_module(BUILT[module].__module__).__doc__ or ""
    assert "cost" in doc.lower(), f"{BUILT[module].__module__}'s doc never says what it costs"


@pytest.mark.parametrize("module", sorted(set(BUILT) - set(WITHOUT_CONTRACT_BACKEND)))
def test_every_driver_runs_the_contract_suite_through_a_backend_file(module: str) -> None:
    # A backend is named after the driver it opens (`backend_redis_cluster.py` opens
    # the Redis driver too, under a name of its own).
    assert BUILT[module].name in BACKENDS, (
        f"no tests/contract/backend_*.py names the `{BUILT[module].name}` driver ({module})"
    )


def test_every_driver_package_is_held_independent_of_the_others() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    [independence] = [c for c in contracts if c["type"] == "independence"]
    listed = set(independence["modules"])
    for module in BUILT:
        top = ".".join(module.split(".")[:4]) if ".database." in module else module
        assert top in listed, f"{top} is missing from the drivers' independence contract"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("rainier_queue.stored", "rainier_queue.envelope.reading"),
        ("rainier_queue.entry_fields", "rainier_queue.envelope.fields"),
        ("rainier_queue.packing", "rainier_queue.envelope.packing"),
        ("rainier_queue.envelope", "rainier_queue.envelope.model"),
    ],
)
def test_the_stored_form_is_one_package_and_its_old_import_paths_still_work(
    old: str, new: str
) -> None:
    before, now = importlib.import_module(old), importlib.import_module(new)
    defined = getattr(now, "__all__", None) or [
        name
        for name, value in vars(now).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == new
    ]
    public = [name for name in defined if not name.startswith("_")]
    assert public
    for name in public:
        assert getattr(before, name, None) is getattr(now, name), f"{old}.{name}"
