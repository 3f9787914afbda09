"""An import-only stand-in for Ray, for verl 0.9.1's actor on a machine without Ray (a bare GPU machine).

verl imports Ray at module level (``verl/protocol.py:29``, ``verl/single_controller/ray/base.py:23-26``,
``verl/checkpoint_engine/base.py:19``) although its actor, run in one process, never calls it. This package has
the names those imports need; every call raises, except :func:`is_initialized`, whose true answer here is
``False`` (``verl/utils/distributed.py:47`` asks it before reading Ray's accelerator ids).

It is put on ``PYTHONPATH`` only by ``scripts/gpu_first_hour.sh`` (and the test that simulates a bare machine),
and only where no real Ray is installed: never install it into an environment.
"""

STUB = True  # what the bare-machine script checks to tell this package from the real Ray


class RayStubError(RuntimeError):
    """Something called Ray where only verl-ext's import stub is installed."""


def unavailable(name: str):
    """A function that raises when called: ``ray.<name>`` does not exist on this machine."""
    def call(*args, **kwargs):
        raise RayStubError(f"ray.{name} was called, but this process has only verl-ext's import stub for Ray "
                           "(scripts/bare_gpu/ray_import_stub): verl's actor runs here without Ray; what needs "
                           "Ray (worker groups, the trainer, rollout servers) needs the real package")
    call.__name__ = name
    return call


def stub_class(name: str) -> type:
    """A class that cannot be instantiated (verl uses some only in ``isinstance`` checks and annotations)."""
    return type(name, (), {"__init__": lambda self, *a, **k: unavailable(name)(), "__module__": __name__})


def is_initialized() -> bool:
    return False


class _Remote:
    """What ``ray.remote(cls)`` returns: verl decorates classes at import time (``@ray.remote``,
    ``ray.remote(CheckpointEngineWorker)``); starting one (``.remote()``, ``.options()``) raises."""

    def __init__(self, target):
        self.target = target
        self.remote = unavailable(f"remote({target.__name__}).remote")
        self.options = unavailable(f"remote({target.__name__}).options")


def remote(*args, **kwargs):
    """``ray.remote`` as a decorator, bare (``@ray.remote``) or with options (``@ray.remote(num_cpus=1)``)."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return _Remote(args[0])
    return _Remote


ObjectRef = stub_class("ObjectRef")
for _name in ("init", "get", "put", "wait", "kill", "shutdown", "get_actor", "nodes",
              "get_runtime_context", "available_resources", "cluster_resources", "method"):
    globals()[_name] = unavailable(_name)
del _name

from ray import actor, util  # noqa: E402  (the real package imports them too: verl writes ray.actor.ActorHandle)
