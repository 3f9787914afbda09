"""Task selector x budget allocator x rollout filter: registries and builders.

A Hydra config group per axis (``selector=``, ``allocator=``, ``rollout_filter=``) holds a ``name``
and that component's fields; :func:`build_selector` and friends turn it into the component,
rejecting unknown keys with the valid ones listed. New components register with
:func:`register`, or come from a user's file or package with ``<axis>=custom`` (:mod:`verl_ext.axes.plugins`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_ext.axes.ads import AdsSelector, AdsSelectorConfig
from verl_ext.axes.allocators import FixedAllocator, FixedAllocatorConfig, VarianceAllocator, VarianceAllocatorConfig
from verl_ext.axes.base import BudgetAllocator, RolloutFilter, TaskSelector
from verl_ext.axes.bots import BotsSelector, BotsSelectorConfig
from verl_ext.axes.coba import CobaAllocator, CobaAllocatorConfig, CobaOfficialAllocator, CobaOfficialAllocatorConfig
from verl_ext.axes.cbs import CbsFilter, CbsFilterConfig, CbsStarFilter, CbsStarFilterConfig
from verl_ext.axes.chain import FilterChain
from verl_ext.axes.dots import DotsSelector, DotsSelectorConfig
from verl_ext.axes.filters import (
    DapoDynamicFilter, DapoDynamicFilterConfig, DegenerateGroupFilter, DegenerateGroupFilterConfig, KeepAllFilter,
    KeepAllFilterConfig,
)
from verl_ext.axes.knapsack import KnapsackAllocator, KnapsackAllocatorConfig
from verl_ext.axes.progress import (
    ProgressSelector, ProgressSelectorConfig, PromptUtilitySelector, PromptUtilitySelectorConfig,
)
from verl_ext.axes.plugins import CUSTOM, dataclass_config, resolve_custom
from verl_ext.axes.replay_fifo import ReplayFifoFilter, ReplayFifoFilterConfig
from verl_ext.axes.selectors import SequentialSelector, SequentialSelectorConfig, UniformSelector, UniformSelectorConfig
from verl_ext.axes.views import RolloutView, StepResults, TaskPool, TaskStats

AXES = ("selector", "allocator", "rollout_filter")
REGISTRY: dict[str, dict[str, tuple[type, type]]] = {axis: {} for axis in AXES}


def register(axis: str, config_cls: type, component_cls: type) -> None:
    """Make ``<axis>.name=<config_cls.name>`` build ``component_cls``."""
    name = config_cls.__dataclass_fields__["name"].default
    REGISTRY[axis][name] = (config_cls, component_cls)


register("selector", UniformSelectorConfig, UniformSelector)
register("selector", SequentialSelectorConfig, SequentialSelector)
register("selector", BotsSelectorConfig, BotsSelector)
register("selector", AdsSelectorConfig, AdsSelector)
register("selector", DotsSelectorConfig, DotsSelector)
register("selector", ProgressSelectorConfig, ProgressSelector)
register("selector", PromptUtilitySelectorConfig, PromptUtilitySelector)
register("allocator", FixedAllocatorConfig, FixedAllocator)
register("allocator", VarianceAllocatorConfig, VarianceAllocator)
register("allocator", CobaAllocatorConfig, CobaAllocator)
register("allocator", CobaOfficialAllocatorConfig, CobaOfficialAllocator)
register("allocator", KnapsackAllocatorConfig, KnapsackAllocator)
register("rollout_filter", KeepAllFilterConfig, KeepAllFilter)
register("rollout_filter", DegenerateGroupFilterConfig, DegenerateGroupFilter)
register("rollout_filter", CbsStarFilterConfig, CbsStarFilter)
register("rollout_filter", CbsFilterConfig, CbsFilter)
register("rollout_filter", DapoDynamicFilterConfig, DapoDynamicFilter)
register("rollout_filter", ReplayFifoFilterConfig, ReplayFifoFilter)


def resolve(axis: str, cfg: Mapping[str, Any]) -> tuple[type, Any]:
    """(component class, config dataclass) of ``cfg`` (a dict or DictConfig with ``name``: a built-in's, or a user's for
    ``custom``); unknown names and keys are an error."""
    cfg = dict(cfg)
    name = cfg.get("name")
    if name == CUSTOM:  # a user's component (verl_ext.axes.plugins)
        return resolve_custom(axis, cfg)
    if name not in REGISTRY[axis]:
        raise ValueError(f"unknown {axis} {name!r}; choose from {sorted(REGISTRY[axis])}")
    config_cls, component_cls = REGISTRY[axis][name]
    return component_cls, dataclass_config(config_cls, cfg, f"{axis}={name}")


def make_config(axis: str, cfg: Mapping[str, Any]):
    """The config dataclass for ``cfg`` (a dict or DictConfig with ``name``); unknown keys are an error."""
    return resolve(axis, cfg)[1]


def component_class(axis: str, cfg: Mapping[str, Any]) -> type:
    """The class ``cfg`` builds (a built-in's or a user's, ``name: custom``)."""
    return resolve(axis, cfg)[0]


def _build(axis: str, cfg, *args):
    component_cls, config = resolve(axis, cfg)
    return component_cls(config, *args)


def build_selector(cfg, pool: TaskPool, seed: int) -> TaskSelector:
    return _build("selector", cfg, pool, seed)


def build_allocator(cfg, seed: int) -> BudgetAllocator:
    return _build("allocator", cfg, seed)


def build_filter(cfg, seed: int, prefilters=()) -> RolloutFilter:
    """The rollout filter of ``cfg``; with ``prefilters`` (configs run first, in order) a :class:`FilterChain`."""
    last = _build("rollout_filter", cfg, seed)
    return FilterChain([_build("rollout_filter", c, seed) for c in prefilters] + [last]) if prefilters else last


__all__ = [
    "AXES", "REGISTRY", "register", "resolve", "make_config", "component_class", "build_selector", "build_allocator",
    "build_filter",
    "TaskSelector", "BudgetAllocator", "RolloutFilter", "TaskPool", "StepResults", "TaskStats", "RolloutView",
]
