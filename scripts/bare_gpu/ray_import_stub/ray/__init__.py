"""An import-only stand-in for Ray, for verl 0.9.1's actor on a machine without Ray (a bare GPU machine).

verl imports Ray at module level (``verl/protocol.py:29``, ``verl/single_controller/ray/base.py:23-26``,
``verl/checkpoint_engine/base.py:19``) and decorates classes with ``@ray.remote`` at import time, although its
actor, run in one process, never calls Ray. Every name of this package and its submodules exists: a capitalised
one is a class that cannot be instantiated (verl uses ``ray.ObjectRef`` in ``isinstance``), any other a function
that raises :class:`RayStubError` when called. Two exceptions: :func:`remote` returns a handle whose use raises,
and :func:`is_initialized` answers ``False``, the truth here (``verl/utils/distributed.py:47`` asks it).

It is put on ``PYTHONPATH`` only by ``scripts/gpu_first_hour.sh`` (and the test that simulates a bare machine),
and only where no real Ray is installed: never install it into an environment.
"""


import functools


class RayStubError(RuntimeError):
    """Something called Ray where only verl-ext's import stub is installed."""


def refuse(name: str):
    raise RayStubError(f"{name} was called, but this process has only verl-ext's import stub for Ray "
                       "(scripts/bare_gpu/ray_import_stub): verl's actor runs here without Ray; worker groups, the "
                       "trainer and rollout servers need the real package")


def stub_names(module: str):
    """A module ``__getattr__`` giving every missing name of ``module`` as a stub class or raising function (the
    same object each time)."""
    @functools.cache
    def name_in(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():
            return type(name, (), {"__init__": lambda self, *a, **k: refuse(f"{module}.{name}"), "__module__": module})
        return lambda *args, **kwargs: refuse(f"{module}.{name}")
    return name_in


__getattr__ = stub_names("ray")


def is_initialized() -> bool:
    return False


class _Remote:
    """What ``ray.remote(cls)`` returns; starting it (``.remote()``, ``.options()``) raises."""

    def __init__(self, target):
        self.remote = stub_names(f"ray.remote({target.__name__})")("remote")
        self.options = stub_names(f"ray.remote({target.__name__})")("options")


def remote(*args, **kwargs):
    """``ray.remote`` as a decorator, bare (``@ray.remote``) or with options (``@ray.remote(num_cpus=1)``)."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return _Remote(args[0])
    return _Remote


import importlib  # noqa: E402

for _submodule in ("actor", "util"):  # imported by the real package too: verl writes ray.actor.ActorHandle
    importlib.import_module(f"ray.{_submodule}")
