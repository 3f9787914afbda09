"""A simulated learner that predicts, under stated assumptions, which way each data-selection component pushes
training at paper scale, on a CPU.

It is a model, not a reproduction: tasks with a latent skill, an embedding and a difficulty in world presets that
disagree on the core assumptions (:mod:`verl_ext.apps.sim.world`), a policy trained on the objective's advantages of
the rows that reach the update (:mod:`verl_ext.apps.sim.learner`), and the trainer's step driving the component classes
with the configs the recipes compose (:mod:`verl_ext.apps.sim.loop`, :mod:`verl_ext.apps.sim.recipes`,
:mod:`verl_ext.apps.sim.grid`). ``python -m verl_ext.apps.sim`` (``make simulate``) runs every study in every world over
seeds and writes tables, plots and what the model predicts for the papers' claims, per world
(:mod:`verl_ext.apps.sim.report`, :mod:`verl_ext.apps.sim.grid_plots`, :mod:`verl_ext.apps.sim.claims`);
``python -m verl_ext.apps.sim.calibration`` compares its mechanism metrics with the real CPU trainer's. No verl, Ray or
model inside the simulator itself.
"""
