"""A simulated learner for comparing and tuning the data-selection components at paper scale on a CPU.

It is a model, not a reproduction: tasks with a latent skill, an embedding and a difficulty
(:mod:`verl_ext.sim.world`), a policy whose per-skill ability grows with the learning signal of the rollouts that
reach the update and transfers to nearby tasks (:mod:`verl_ext.sim.learner`), and the trainer's step driving the
very component classes and Hydra configs the trainer uses (:mod:`verl_ext.sim.loop`, :mod:`verl_ext.sim.grid`).
``python -m verl_ext.sim`` (``make simulate``) runs every study over seeds and writes tables, plots and the papers'
claims as seen in simulation (:mod:`verl_ext.sim.report`, :mod:`verl_ext.sim.plots`, :mod:`verl_ext.sim.claims`).
No verl, Ray or model inside.
"""
