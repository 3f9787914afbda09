"""A selector, allocator or rollout filter from a user's file or installed package (``<axis>=custom``).

``<axis>.path`` is a ``.py`` file (relative paths from the launch directory) or a dotted module name, ``<axis>.cls``
the class in it and ``<axis>.config`` its config's fields. The class subclasses the axis's base class
(:mod:`verl_ext.axes.base`, whose docstrings state the contract) and names its config dataclass as ``config_class``;
the config is built like a built-in's (unknown key: the valid ones listed; lists become tuples where the default is
one). Every failure names the axis, the path and the class.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Mapping
from typing import Any

CUSTOM = "custom"
KEYS = ("name", "path", "cls", "config")
AXES = ("selector", "allocator", "rollout_filter")


def _base(axis: str) -> type:
    from verl_ext.axes.base import BudgetAllocator, RolloutFilter, TaskSelector

    return {"selector": TaskSelector, "allocator": BudgetAllocator, "rollout_filter": RolloutFilter}[axis]


def is_file(path: str) -> bool:
    """``path`` names a file (``x.py``, ``dir/x``), not a dotted module."""
    return path.endswith(".py") or os.sep in path


def absolute(path: str) -> str:
    """A file path made absolute (from the launch directory: the Ray workers and the simulator's processes start
    elsewhere); a module name unchanged."""
    return os.path.abspath(path) if is_file(path) else path


def spec_overrides(spec: str) -> tuple[str, ...]:
    """``selector=custom,selector.path=f.py,selector.cls=C,+selector.config.epsilon=0.2`` (one component as the trainer
    takes it, comma-separated: the simulator's ``--custom``, the bench's ``--component``) -> its overrides, each
    ``AXIS.KEY=VALUE`` after the first ``AXIS=NAME``, a leading ``+`` dropped and ``AXIS.path`` made absolute."""
    parts = [p.strip().lstrip("+") for p in spec.split(",") if p.strip()]
    axis, sep, _ = parts[0].partition("=") if parts else ("", "", "")
    if axis not in AXES or not sep or any(not p.startswith(f"{axis}.") or "=" not in p for p in parts[1:]):
        raise ValueError(f"{spec!r}: expected AXIS=NAME,AXIS.KEY=VALUE,... with AXIS one of {list(AXES)}")
    return tuple(f"{k}={absolute(v)}" if k == f"{axis}.path" else f"{k}={v}"
                 for k, _, v in (p.partition("=") for p in parts))


def _module(axis: str, path: str, cls: str):
    where = f"{axis}=custom {axis}.path={path} {axis}.cls={cls}"
    if is_file(path):
        file = os.path.abspath(path)
        if not os.path.isfile(file):
            raise ValueError(f"{where}: no file {file}")
        name = "verl_ext_custom_" + hashlib.sha1(file.encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name], where
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[name]
            raise ValueError(f"{where}: importing {file} failed: {type(e).__name__}: {e}") from e
        return module, where
    try:
        return importlib.import_module(path), where
    except Exception as e:
        raise ValueError(f"{where}: importing module {path} failed: {type(e).__name__}: {e}") from e


def component_class(axis: str, cfg: Mapping[str, Any]) -> tuple[type, type]:
    """(config dataclass, component class) of a ``name: custom`` config."""
    unknown = sorted(set(cfg) - set(KEYS))
    if unknown:
        raise ValueError(f"{axis}=custom: unknown keys {unknown}; valid keys are {sorted(KEYS)} (the component's own "
                         f"fields go under {axis}.config)")
    path, cls = cfg.get("path"), cfg.get("cls")
    if not path or not cls or path == "???" or cls == "???":
        raise ValueError(f"{axis}=custom needs {axis}.path (a .py file or a module) and {axis}.cls (the class)")
    module, where = _module(axis, str(path), str(cls))
    component = getattr(module, str(cls), None)
    if not inspect.isclass(component):
        have = sorted(n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == module.__name__)
        raise ValueError(f"{where}: no class {cls} there; its classes: {have}")
    base = _base(axis)
    if not issubclass(component, base):
        raise ValueError(f"{where}: {cls} is not a subclass of verl_ext.axes.base.{base.__name__}")
    config_cls = getattr(component, "config_class", None)
    if not (inspect.isclass(config_cls) and dataclasses.is_dataclass(config_cls)):
        raise ValueError(f"{where}: {cls}.config_class must name its config dataclass, got {config_cls!r}")
    return config_cls, component


def dataclass_config(config_cls: type, values: dict, where: str, place: str = ""):
    """``config_cls(**values)``, a built-in's or a user's: unknown keys an error naming ``where`` (and the ``place``
    they were found in) with the valid keys; Hydra lists (ListConfig) made tuples where the field's default is one."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}{place}; valid keys are {sorted(fields)}")
    for key, value in values.items():
        if isinstance(fields[key].default, tuple) and not isinstance(value, tuple):
            values[key] = tuple(value)
    return config_cls(**values)


def resolve_custom(axis: str, cfg: Mapping[str, Any]) -> tuple[type, Any]:
    """(component class, its config) of a ``name: custom`` config, the file loaded once."""
    config_cls, component = component_class(axis, cfg)
    where = f"{axis}=custom {component.__name__}"
    try:
        return component, dataclass_config(config_cls, dict(cfg.get("config") or {}), where, f" in {axis}.config")
    except TypeError as e:
        raise ValueError(f"{where}: {e}") from e
