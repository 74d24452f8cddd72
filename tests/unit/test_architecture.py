# SPDX-License-Identifier: MIT
"""`docs/architecture.md`'s checklist for a driver's author, held against the tree.

The checklist says what a new driver brings with it; these tests read the
tree and the registry and fail, naming what is missing, for any driver that
does not bring it. So the list cannot drift from what the code needs.

Some items are about the code's shape, not its behaviour: one layout for
every driver package, parts held as objects rather than mixed in, and every
reserve reading storage through `stored`. Those are read from the source
with `ast`, and the reading itself is tested on small examples that break
each rule, so a check that had gone blind would fail here too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rainier_queue.drivers import _SCHEMES
from rainier_queue.drivers.options import DriverSettings
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

WITHOUT_STORAGE = {
    "rainier_queue.drivers.memory": "keeps the jobs it was handed as objects in this process",
    "rainier_queue.drivers.inline": "runs the job inside dispatch and stores nothing",
    "rainier_queue.drivers.recording": "the fake: keeps what is pushed, delivers nothing",
}
"""Drivers that read nothing back from storage, so nothing they hand out can be malformed."""

SEAMS = {"rainier_queue.drivers.database.DatabaseQueue"}
"""Base classes a driver may inherit beside the port: a seam several drivers share."""

STORED_READERS = frozenset({"read_envelope", "read_columns"})
"""`stored`'s total readers: an entry in, a job or a `Malformed` out, never an exception."""


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


# -- one shape for every driver package ------------------------------------------------

PACKAGES = sorted(m for m in BUILT if hasattr(importlib.import_module(m), "__path__"))
"""The drivers that are packages (a small driver may be one module)."""


def _source(module: str) -> ast.Module:
    path = inspect.getsourcefile(importlib.import_module(module))
    assert path is not None
    return ast.parse(Path(path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("module", PACKAGES)
def test_every_driver_package_has_a_connection_a_settings_and_a_queue_module(
    module: str,
) -> None:
    folder = Path(importlib.import_module(module).__path__[0])
    missing = [f for f in ("connection.py", "settings.py", "queue.py") if not (folder / f).exists()]
    assert not missing, f"{module} has no {', '.join(missing)} (docs/architecture.md)"
    assert BUILT[module].__module__ == f"{module}.queue", f"{module}'s queue is not in queue.py"


@pytest.mark.parametrize("module", PACKAGES)
def test_every_driver_translates_its_clients_errors_in_its_connection_module(module: str) -> None:
    tree = _source(f"{module}.connection")
    names = {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert names & {"translated", "translate"}, (
        f"{module}.connection has no top-level `translated()`: the one place its client's "
        "exceptions become the error tree"
    )


def _settings_class(module: str) -> type[DriverSettings]:
    settings = importlib.import_module(f"{module}.settings")
    found = [
        value
        for value in vars(settings).values()
        if isinstance(value, type)
        and issubclass(value, DriverSettings)
        and value is not DriverSettings
        and value.__module__ == settings.__name__
    ]
    assert len(found) == 1, f"{module}.settings should define one DriverSettings, not {found}"
    return found[0]


@pytest.mark.parametrize("module", PACKAGES)
def test_every_driver_reads_its_options_into_one_frozen_settings_object(module: str) -> None:
    settings = _settings_class(module)
    params = vars(settings).get("__dataclass_params__")  # no public name for it
    assert params is not None, f"{settings.__qualname__} is not a dataclass"
    assert params.frozen, f"{settings.__qualname__} is not frozen"
    assert isinstance(settings.OPTIONS, frozenset), f"{settings.__qualname__} has no OPTIONS"
    driver_options: frozenset[str] = getattr(BUILT[module], "OPTIONS", frozenset())
    assert driver_options >= settings.OPTIONS, (
        f"{BUILT[module].__qualname__}.OPTIONS leaves out some of {settings.__qualname__}'s"
    )
    queue_source = ast.dump(_source(f"{module}.queue"))
    assert f"id='{settings.__name__}'" in queue_source, (
        f"{module}.queue never reads {settings.__name__}"
    )


@pytest.mark.parametrize("module", PACKAGES)
def test_a_drivers_lock_store_builds_from_the_same_settings_as_its_queue(module: str) -> None:
    store = ROOT / "src" / "rainier_queue" / "cache" / f"{BUILT[module].name}.py"
    if not store.exists():
        pytest.skip(f"the `{BUILT[module].name}` driver has no lock store of its own")
    settings = _settings_class(module)
    calls = [
        node
        for node in ast.walk(ast.parse(store.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "read"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == settings.__name__
    ]
    assert calls, f"cache/{store.name} does not build from {settings.__name__}.read"


@pytest.mark.parametrize("module", sorted(BUILT))
def test_a_drivers_parts_are_objects_it_holds_not_classes_it_mixes_in(module: str) -> None:
    driver = BUILT[module]
    mixed_in = [
        f"{base.__module__}.{base.__qualname__}"
        for base in driver.__mro__[1:]
        if base.__module__.startswith("rainier_queue.drivers")
        and f"{base.__module__}.{base.__qualname__}" not in SEAMS
    ]
    assert not mixed_in, (
        f"{driver.__qualname__} mixes in {mixed_in}: hold each part as an object "
        "(as KafkaQueue holds its Reserver and Waker), so no part needs stub methods"
    )


@pytest.mark.parametrize("module", sorted(set(BUILT) - SERVER_FREE - set(WITHOUT_STORAGE)))
def test_a_drivers_package_doc_says_what_choosing_it_costs(module: str) -> None:
    docs = [importlib.import_module(module).__doc__ or ""]
    docs.append(importlib.import_module(BUILT[module].__module__).__doc__ or "")
    section = next((d for d in docs if "Read this before choosing it" in d), "")
    assert section, f"neither {module} nor its queue module has a 'Read this before choosing it'"
    assert "cost" in section.split("Read this before choosing it", 1)[1].lower(), (
        f"{module}'s 'Read this before choosing it' never says what choosing it costs"
    )


# -- every reserve reads storage through `stored` ----------------------------------------


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `function`'s body, without those of functions defined inside it."""
    for child in ast.iter_child_nodes(function):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        yield child
        yield from _own_nodes(child)


def _called(node: ast.AST) -> str | None:
    """The name a call calls: `f(...)` and `x.f(...)` are both `f`."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _root(node: ast.AST) -> str | None:
    """The variable an expression starts from: `job`, `job.with_changes(...)` -> `job`."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        else:
            return None


def _read_from_stored(function: ast.AST) -> set[str]:
    """The names in `function` whose value comes from a `stored` reader, however indirectly.

    A name is tainted when the expression bound to it (an assignment, a `for`
    or a comprehension over it) calls a reader or uses a tainted name.
    """
    bindings: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            bindings += [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            bindings.append((node.target, node.value))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            bindings.append((node.target, node.iter))
    tainted: set[str] = set()
    while True:
        before = len(tainted)
        for target, value in bindings:
            reads = any(_called(n) in STORED_READERS for n in ast.walk(value))
            if reads or _names_in(value) & tainted:
                tainted |= _names_in(target)
        if len(tainted) == before:
            return tainted


def reservations_not_read_through_stored(source: str) -> list[str]:
    """Each `Reservation(...)` in `source` whose job was not read by `stored`, and why."""
    problems: list[str] = []
    for function in _functions(ast.parse(source)):
        for node in _own_nodes(function):
            if _called(node) != "Reservation":
                continue
            assert isinstance(node, ast.Call)
            job = next((k.value for k in node.keywords if k.arg == "job"), None)
            name = None if job is None else _root(job)
            where = f"{function.name} (line {node.lineno})"
            if name is None or name not in _read_from_stored(function):
                problems.append(f"{where}: the job is not read by stored.read_envelope/columns")
                continue
            checked = any(
                _called(n) == "isinstance"
                and isinstance(n, ast.Call)
                and len(n.args) == 2
                and _root(n.args[0]) == name
                and _names_in(n.args[1]) == {"Malformed"}
                for n in ast.walk(function)
            )
            if not checked:
                problems.append(f"{where}: `{name}` is never checked for a Malformed entry")
    return problems


def _driver_modules(module: str) -> list[str]:
    """The modules that make a driver: its package's, and those of the seams it inherits."""
    driver = BUILT[module]
    found = {c.__module__ for c in driver.__mro__ if c.__module__.startswith("rainier_queue")}
    package = importlib.import_module(module)
    if hasattr(package, "__path__"):
        for path in Path(package.__path__[0]).glob("*.py"):
            found.add(f"{module}.{path.stem}" if path.stem != "__init__" else module)
    return sorted(found - {"rainier_queue.queue"})


def _text_of(module: str) -> str:
    path = inspect.getsourcefile(importlib.import_module(module))
    assert path is not None
    return Path(path).read_text(encoding="utf-8")


@pytest.mark.parametrize("module", sorted(set(BUILT) - set(WITHOUT_STORAGE)))
def test_every_reserve_path_reads_storage_through_stored(module: str) -> None:
    built = 0
    problems: list[str] = []
    for part in _driver_modules(module):
        text = _text_of(part)
        built += sum(_called(n) == "Reservation" for n in ast.walk(ast.parse(text)))
        problems += [f"{part}.{p}" for p in reservations_not_read_through_stored(text)]
    # Not trivially true: a driver whose reservations are built somewhere this
    # does not look (a helper in another package) fails here, not silently.
    assert built, f"no Reservation(...) is built in {module} or the seams it inherits"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module", sorted(set(BUILT) - set(WITHOUT_STORAGE)))
def test_every_driver_with_storage_quarantines_through_the_toolkit(module: str) -> None:
    calls = [
        part
        for part in _driver_modules(module)
        if any(_called(n) == "quarantine" for n in ast.walk(ast.parse(_text_of(part))))
    ]
    assert calls, (
        f"{module} never calls drivers.malformed.quarantine: an entry that is not a job "
        "goes to the failed store with its log line through it"
    )


def test_the_storage_check_finds_a_job_read_around_stored() -> None:
    source = """
async def reserve(rows):
    for entry_id, body in rows:
        job = QueuedJob.from_json(body)
        yield Reservation(job=job, token="t", handle=entry_id)
"""
    [problem] = reservations_not_read_through_stored(source)
    assert "not read by stored" in problem


def test_the_storage_check_finds_a_read_that_never_looks_for_a_malformed_entry() -> None:
    source = """
async def reserve(rows):
    for entry_id, body in rows:
        job = read_envelope(body)
        yield Reservation(job=job.with_changes(queue="q"), token="t", handle=entry_id)
"""
    [problem] = reservations_not_read_through_stored(source)
    assert "never checked for a Malformed" in problem


def test_the_storage_check_follows_a_read_through_lists_and_loops() -> None:
    source = """
async def claim(rows, tokens):
    read = [(row, read_columns(row[1:])) for row in rows]
    good = [(row, job) for row, job in read if not isinstance(job, Malformed)]
    for (row, job), token in zip(good, tokens):
        yield Reservation(job=job, token=token, handle=row[0])
"""
    assert reservations_not_read_through_stored(source) == []
