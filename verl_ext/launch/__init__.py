"""The launch path: ``python -m verl_ext.main`` (:mod:`.main`: the CPU preset, the recipe tables, the recipe key check,
the verl version check, Hydra's composition) and ``python -m verl_ext.sft`` (:mod:`.sft`)."""
