"""The floors of the house: no module imports one from a floor above its own.

From the bottom: the library (``verl_ext`` but ``verl_ext.apps``: axes, rewards, cpu, trainer, models, launch, ...),
then ``data_prep``, then ``eval``, then the applications (``verl_ext.apps``). Every import counts, those inside
functions too. No module stands loose at ``verl_ext``'s root but the two entry points.
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
