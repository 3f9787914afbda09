"""Applications built on the library (:mod:`verl_ext`'s axes, rewards, cpu, trainer, models and launch) and on
:mod:`data_prep` and :mod:`eval`: the demo and the study of methods on the real trainer (their shared inputs:
:mod:`.inputs`), the warm-started embedded policy, RFT, the simulator, the benchmarks, a run's summary, each ``python -m
verl_ext.apps.<name>``, and the GPU tools (:mod:`.gpu`: ``python -m verl_ext.apps.gpu.<name>``). The library never
imports them."""
