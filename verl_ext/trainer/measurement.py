"""Measurement-only rollouts: the tasks a selector names in ``measurement(step)`` rolled out with the current policy
before the step's selection, scored, handed to ``measure(step, results)`` and dropped: never trained on, never seen by
the allocator or the rollout filter. DOTS's reference set (Sun et al. 2025, §3; the authors' ``ray_trainer.py``
813-884 rolls 256 reference prompts out, measures their pass rates, then predicts and selects in the same round).

verl 0.9.1's synchronous trainer chooses the next step's prompts while its rollout replicas are awake
(``PPOTrainerSync.on_step_end`` has just synced their weights; ``on_sample_end`` puts them to sleep), so the
measurement takes the training rollout path (TransferQueue partition ``train``, the agent loop, the reward loop, the
training sampling parameters) before the step's own prompts are submitted, and its rows leave TransferQueue as soon
as they are scored.
"""

from __future__ import annotations

import uuid

import numpy as np
import transfer_queue as tq
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn

from verl_ext.axes import StepResults
from verl_ext.trainer.tq_rows import as_list, rollout_rewards

PREFIX = "data_selection/measurement/"


def measurement_rollouts(trainer, tasks: np.ndarray, n: int) -> StepResults:
    """``n`` rollouts of each task of ``tasks`` (stable indices) through ``trainer``'s rollout, scored; their rows
    are cleared from TransferQueue before this returns."""
    batch_dict = collate_fn([trainer.train_dataset[int(p)] for p in trainer.task_pool.positions(tasks)])
    batch_dict["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(tasks))], dtype=object)
    batch_dict["__rollout_n__"] = [int(n)] * len(tasks)  # AgentLoopWorkerTQ._run_prompt pops it
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", trainer.global_steps)
    trainer._submit_batch_to_rollout(batch)
    scored, _ = trainer.replay_buffer.sample(global_steps=trainer.global_steps, partition_id="train",
                                             batch_size=len(tasks))
    if trainer.reward_loop_manager.reward_loop_worker_handles is None:  # a colocated reward model, as _validate
        trainer.checkpoint_manager.sleep_replicas()
        scored = trainer._compute_reward_colocate(scored)
        trainer.checkpoint_manager.update_weights(trainer.global_steps)
    try:
        keys = [k for k, t in zip(scored.keys, scored.tags) if not t.get("is_padding", False)]
        data = tq.kv_batch_get(keys=keys, partition_id=scored.partition_id, select_fields=["index", "rm_scores"])
        index = np.array(as_list(data["index"]), dtype=np.int64)
        reward = rollout_rewards(data.select("rm_scores").to_padded_tensor()["rm_scores"])
    finally:
        tq.kv_clear(keys=scored.keys, partition_id=scored.partition_id)
    unknown = sorted(set(index.tolist()) - set(np.asarray(tasks).tolist()))
    if unknown:
        raise RuntimeError(f"step {trainer.global_steps}: measurement rollouts of tasks {unknown[:5]} that were not "
                           "asked for (another batch was in TransferQueue's train partition)")
    return StepResults.from_rewards(index, reward.astype(np.float64))


def measurement_metrics(results: StepResults) -> dict[str, float]:
    """Logged apart from the step's own rollouts: prompts and rollouts measured, and the share of measured prompts
    the policy solved never / always (their groups are degenerate)."""
    stats = results.per_task()
    return {PREFIX + "prompts": float(len(stats.index)), PREFIX + "rollouts": float(len(results.reward)),
            PREFIX + "solve_none": float(np.mean(stats.pass_rate == 0)),
            PREFIX + "solve_all": float(np.mean(stats.pass_rate == 1)),
            PREFIX + "degenerate_group_rate": float(np.mean(stats.degenerate))}
