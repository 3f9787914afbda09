"""Applications built on the library (:mod:`verl_ext`'s axes, rewards, cpu and trainer) and on :mod:`data_prep` and
:mod:`eval`: the demo, the warm-started embedded policy, RFT, the simulator, the study of methods on the real trainer,
the benchmarks, the GPU check and a run's summary, each ``python -m verl_ext.apps.<name>``. The library never imports
them."""
