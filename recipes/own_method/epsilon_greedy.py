from dataclasses import dataclass
import numpy as np
from verl_ext.axes.base import TaskSelector, require_finite


@dataclass(frozen=True)
class EpsilonGreedyConfig:
    epsilon: float = 0.1  # each slot of a batch drawn at random with this probability


class EpsilonGreedy(TaskSelector):
    config_class = EpsilonGreedyConfig
    stale_evidence = "[decision] used as if fresh: a pass rate changes slowly against a few updates of lag"

    def __init__(self, config, pool, seed):
        super().__init__(config, pool, seed)
        self.rng, self.successes, self.rollouts = np.random.default_rng(seed), np.zeros(len(pool)), np.zeros(len(pool))

    def select(self, step, batch_size, exclude=None):
        free = self.available(exclude, batch_size)
        free = np.arange(len(self.pool)) if free is None else np.flatnonzero(free)
        rate = np.where(self.rollouts > 0, self.successes / np.maximum(self.rollouts, 1), 0.5)  # unvisited: 0.5
        order = free[np.lexsort((self.rng.random(len(free)), np.abs(rate[free] - 0.5)))]  # nearest 0.5 first
        greedy = batch_size - self.rng.binomial(batch_size, self.config.epsilon)  # each slot random w.p. epsilon
        explore = self.rng.permutation(order[greedy:])[: batch_size - greedy]
        return self.pool.index[np.concatenate([order[:greedy], explore])]

    def update(self, step, results):
        require_finite(f"selector={self.name}", step, reward=results.reward)
        positions = self.pool.positions(results.task_index)
        np.add.at(self.successes, positions, results.success)
        np.add.at(self.rollouts, positions, 1)

    def state_dict(self):
        return {"successes": self.successes.copy(), "rollouts": self.rollouts.copy(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.successes, self.rollouts = np.array(state["successes"]), np.array(state["rollouts"])
        self.rng.bit_generator.state = state["rng"]
