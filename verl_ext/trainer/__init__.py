"""verl 0.9.1 trainer modes ``verl_ext``, ``verl_ext_colocate_async`` and ``verl_ext_separate_async``
(``trainer.v1.trainer_mode=...``): task selection, rollout budgets and rollout filtering plugged into the v1 trainer,
synchronous or asynchronous.

Importing this package registers the mode. verl looks the mode up inside its TaskRunner (a Ray
actor), so the package must be imported there too: ``python -m verl_ext.main`` adds it to
``VERL_USE_EXTERNAL_MODULES`` for every Ray process (after the CPU plugin in CPU mode).
See :mod:`verl_ext.trainer.mode` for the hooks.
"""

from verl_ext.trainer.mode import (
    TRAINER_MODE, DataSelectionColocateAsync, DataSelectionSeparateAsync, DataSelectionTrainer,
)

__all__ = ["TRAINER_MODE", "DataSelectionTrainer", "DataSelectionColocateAsync", "DataSelectionSeparateAsync"]
