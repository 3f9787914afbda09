"""The floors of the house: no module imports one from a floor above its own.

From the bottom: the library (``verl_ext`` but ``verl_ext.apps``: axes, rewards, cpu, trainer, models, launch, ...),
then ``data_prep``, then ``eval``, then the applications (``verl_ext.apps``). Every import counts, those inside
functions too. No module stands loose at ``verl_ext``'s root but the two entry points, and no two rooms (a package
of ``verl_ext`` or of ``verl_ext.apps``, ``data_prep``, ``eval``) import each other, directly or round a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("library", "data_prep", "eval", "apps")
ROOT_MODULES = {"__init__.py", "main.py", "sft.py"}  # python -m verl_ext.main / verl_ext.sft: verl_ext.launch's


def floor(module: str) -> str | None:
    """The floor of a dotted module name of this repository (``None``: a third-party or standard module)."""
    if module == "verl_ext.apps" or module.startswith("verl_ext.apps."):
        return "apps"
    top = module.split(".")[0]
    return {"verl_ext": "library", "data_prep": "data_prep", "eval": "eval"}.get(top)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))  # and `from verl_ext import apps`: a floor of its own
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                    if floor(f"{node.module}.{alias.name}") != floor(node.module)]
    return out


def source_files() -> list[Path]:
    return sorted(p for package in ("verl_ext", "data_prep", "eval") for p in (ROOT / package).rglob("*.py"))


def upward_imports(files: list[Path], root: Path = ROOT) -> list[str]:
    problems = []
    for path in files:
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        own = FLOORS.index(floor(module))
        for line, name in imported_modules(path):
            other = floor(name)
            if other is not None and FLOORS.index(other) > own:
                problems.append(f"{path.relative_to(root)}:{line} ({floor(module)}) imports {name} ({other})")
    return problems


def test_no_module_imports_a_floor_above_its_own():
    files = source_files()
    assert len(files) > 50 and any("apps" in p.parts for p in files)
    assert upward_imports(files) == []


@pytest.mark.parametrize("package, source, named", [
    ("verl_ext/models", "from eval.metrics import pass_at_k\n", "eval.metrics (eval)"),
    ("data_prep", "def f():\n    from verl_ext.apps import demo\n", "verl_ext.apps (apps)"),
    ("eval", "import verl_ext.apps.sim\n", "verl_ext.apps.sim (apps)"),
    ("verl_ext/trainer", "from verl_ext import apps\n", "verl_ext.apps (apps)"),
])
def test_an_upward_import_is_named_with_its_line(tmp_path, package, source, named):
    probe = tmp_path / package / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(source)
    (problem,) = upward_imports([probe], root=tmp_path)
    assert problem.startswith(f"{package}/probe.py:") and problem.endswith(named)


def loose_modules(package: Path) -> list[str]:
    """The modules at ``package``'s root besides :data:`ROOT_MODULES` (each belongs in a room of its own)."""
    return sorted(p.name for p in package.glob("*.py") if p.name not in ROOT_MODULES)


def test_no_module_stands_loose_at_the_packages_root():
    assert loose_modules(ROOT / "verl_ext") == []
    for name in ROOT_MODULES - {"__init__.py"}:  # the entry points: one import and the call
        assert len((ROOT / "verl_ext" / name).read_text().splitlines()) <= 10, name


def test_a_loose_module_is_named(tmp_path):
    for name in (*ROOT_MODULES, "helpers.py"):
        (tmp_path / name).write_text("")
    assert loose_modules(tmp_path) == ["helpers.py"]


def room(module: str, root: Path = ROOT) -> str | None:
    """The room of a dotted module name: its package under ``verl_ext`` (under ``verl_ext.apps`` for an application
    in a package of its own), ``data_prep`` or ``eval``; ``None`` for a third-party or standard module."""
    parts = module.split(".")
    if parts[0] in ("data_prep", "eval"):
        return parts[0]
    if parts[0] != "verl_ext":
        return None
    depth = 3 if len(parts) > 2 and parts[1] == "apps" and (root / "verl_ext" / "apps" / parts[2]).is_dir() else 2
    return ".".join(parts[:depth])


def room_circles(files: list[Path], root: Path = ROOT) -> list[list[str]]:
    """Each circle of rooms importing one another, as the rooms in order from its first in sorted order."""
    edges: dict[str, set[str]] = {}
    for path in files:
        here = room(".".join(path.relative_to(root).with_suffix("").parts), root)
        for _, name in imported_modules(path):
            there = room(name, root)
            if there is not None and there != here:
                edges.setdefault(here, set()).add(there)
    circles = set()
    for start in edges:
        paths = [[start]]
        while paths:
            path = paths.pop()
            for nxt in edges.get(path[-1], ()):
                if nxt == start and min(path) == start:
                    circles.add(tuple(path))
                elif nxt not in path:
                    paths.append(path + [nxt])
    return sorted(list(c) for c in circles)


def test_no_two_rooms_import_each_other():
    assert room_circles(source_files()) == []


def test_a_circle_of_rooms_is_named(tmp_path):
    for path, source in {"verl_ext/apps/study.py": "from verl_ext.apps.sim import report\n",
                         "verl_ext/apps/sim/report.py": "from verl_ext.apps import study\n",
                         "verl_ext/apps/sim/__init__.py": "", "eval/metrics.py": ""}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(source)
    files = sorted(tmp_path.rglob("*.py"))
    assert room_circles(files, root=tmp_path) == [["verl_ext.apps", "verl_ext.apps.sim"]]
