"""Fast tests of the trainer glue's pure parts: batch accounting, the per-sample loss wrapper, metrics,
config validation, the task pool and the per-run records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict

from verl_ext.axes import RolloutView, StepResults
from verl_ext.trainer import per_sample, records
from verl_ext.trainer.batching import mini_batch_of_rows, plan_mini_batches, real_rows_per_row
from verl_ext.trainer.build_axes import (
    axes_seed, build_axes, rollout_budget, task_pool, validate_axes, validate_training_data,
)
from verl_ext.trainer.step_metrics import selection_metrics


# ------------------------------------------------------------------ batch accounting
@pytest.mark.parametrize("rows, target, dp", [(64, 16, 1), (64, 16, 4), (16, 16, 2), (128, 32, 8)])
def test_plan_is_verls_sizing_when_rows_are_a_multiple_of_the_target(rows, target, dp):
    plan = plan_mini_batches(rows, target, dp)
    assert (plan.num_mini_batches, plan.mini_batch_size, plan.padded_size) == (rows // target, target, rows)


@pytest.mark.parametrize("target, dp", [(8, 1), (8, 2), (16, 4), (6, 4)])
def test_plan_covers_the_rows_with_few_equal_mini_batches(target, dp):
    for rows in range(1, 70):
        plan = plan_mini_batches(rows, target, dp)
        assert plan.num_mini_batches == math.ceil(rows / target)  # fewer rollouts -> fewer optimizer steps
        assert plan.mini_batch_size % dp == 0 and plan.padded_size >= rows
        assert plan.padded_size - rows < plan.num_mini_batches * dp  # padding only evens out the ranks
        if target % dp == 0:
            assert plan.mini_batch_size <= target


def test_mini_batch_ids_follow_verls_dp_chunks_then_consecutive_slices():
    # 12 rows, dp 2 -> ranks get rows 0-5 and 6-11; global mini-batch 4 -> 2 rows per rank per mini-batch
    assert mini_batch_of_rows(12, 4, 2).tolist() == [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]
    with pytest.raises(ValueError):
        mini_batch_of_rows(10, 4, 2)


def test_real_rows_per_row_counts_each_mini_batch_over_all_ranks():
    is_padding = np.array([0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1], dtype=bool)
    # mini-batch ids [0,0,1,1,2,2,0,0,1,1,2,2]: real rows 4, 3, 2
    assert real_rows_per_row(is_padding, 4, 2).tolist() == [4, 4, 3, 3, 2, 2, 4, 4, 3, 3, 2, 2]


# ------------------------------------------------------------------ per-sample loss wrapper
def _actor_config(loss_agg_mode: str):
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp2", rollout_n=1, ppo_micro_batch_size_per_gpu=1, loss_agg_mode=loss_agg_mode,
                       entropy_coeff=0.0, use_kl_loss=False)


def _micro_batch(mask, adv, old, new, global_batch_size, **fields):
    """A worker-side micro-batch as verl's loss sees it (prompts of 2 tokens, no remove-padding)."""
    from verl.utils import tensordict_utils as tu

    def jagged(rows, dtype=torch.float32):
        return torch.nested.as_nested_tensor([torch.as_tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)

    td = TensorDict({"prompts": jagged([[1, 1]] * len(mask), torch.int64),
                     "responses": jagged([[5] * len(m) for m in mask], torch.int64),
                     "response_mask": jagged(mask, torch.int64), "old_log_probs": jagged(old),
                     "advantages": jagged(adv), **fields}, batch_size=len(mask))
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=int(sum(map(sum, mask))), global_batch_size=global_batch_size)
    flat = [v for lp in new for v in [0.0, *lp, 0.0]]  # model log-probs over prompt + response tokens
    return td, {"log_probs": torch.tensor(flat)}


REAL = dict(mask=[[1, 1, 1], [1, 1], [1, 1, 1, 1]], adv=[[1.0] * 3, [-1.0] * 2, [0.5] * 4],
            old=[[-1.0] * 3, [-1.0] * 2, [-1.0] * 4], new=[[-0.5, -1, -1], [-1.5, -1], [-1, -1, -1, -0.7]])
PADDED = {k: v + [[0] if k == "mask" else [0.0]] for k, v in REAL.items()}


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "seq-mean-token-sum", "token-mean"])
def test_padding_rows_do_not_change_the_loss(mode):
    from verl.workers.utils.losses import ppo_loss

    config = _actor_config(mode)
    reference, _ = ppo_loss(config, *reversed(_micro_batch(**REAL, global_batch_size=3)))
    data, output = _micro_batch(**PADDED, global_batch_size=4, sample_pos=torch.tensor([0, 1, 2, -1]),
                                mb_real_rows=torch.tensor([3, 3, 3, 3]))
    loss, metrics = per_sample.per_sample_ppo_loss(config, output, data)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    # per row: the share of response tokens whose PPO clip (0.2) is active
    assert metrics[per_sample.POS] == [0, 1, 2, -1]
    assert metrics[per_sample.CLIPFRAC] == pytest.approx([1 / 3, 1 / 2, 1 / 4, 0.0])
    assert per_sample.ENTROPY not in metrics  # the update computed no entropy


def test_per_sample_entropy_is_the_mean_over_response_tokens():
    data, output = _micro_batch(**REAL, global_batch_size=3, sample_pos=torch.tensor([4, 5, 6]))
    entropy = [[1.0, 2.0, 3.0], [4.0, 6.0], [1.0, 1.0, 1.0, 5.0]]
    output["entropy"] = torch.tensor([v for e in entropy for v in [9.0, *e, 9.0]])  # prompt positions ignored
    _, metrics = per_sample.per_sample_ppo_loss(_actor_config("token-mean"), output, data)
    assert metrics[per_sample.POS] == [4, 5, 6]
    assert metrics[per_sample.ENTROPY] == pytest.approx([2.0, 5.0, 2.0])


def test_seq_mean_without_the_correction_is_diluted_by_padding():
    from verl.workers.utils.losses import ppo_loss

    config = _actor_config("seq-mean-token-mean")
    reference, _ = ppo_loss(config, *reversed(_micro_batch(**REAL, global_batch_size=3)))
    diluted, _ = ppo_loss(config, *reversed(_micro_batch(**PADDED, global_batch_size=4)))
    assert diluted.item() == pytest.approx(reference.item() * 3 / 4, rel=1e-6)


def test_per_sample_stats_are_popped_flattened_and_keep_the_last_epoch():
    metrics = {"actor/pg_loss": [0.1], per_sample.POS: [[3, -1], [0, 3]], per_sample.CLIPFRAC: [[0.1, 0.0], [0.2, 0.4]],
               per_sample.ENTROPY: [[1.0, 0.0], [2.0, 3.0]]}
    stats = per_sample.pop_per_sample(metrics)
    assert metrics == {"actor/pg_loss": [0.1]}
    clipfrac, entropy = per_sample.per_position(stats, [0, 3])
    assert clipfrac.tolist() == [0.2, 0.4] and entropy.tolist() == [2.0, 3.0]
    with pytest.raises(RuntimeError, match="no per-sample"):
        per_sample.per_position(stats, [5])
    assert per_sample.per_position({per_sample.POS: [0], per_sample.CLIPFRAC: [0.5]}, [0])[1] is None


def test_fetched_rows_convert_to_lists_and_response_token_means():
    from tensordict import NonTensorStack

    from verl_ext.trainer.tq_rows import as_list, token_mean

    assert as_list(torch.tensor([3, 1])) == [3, 1] and as_list(NonTensorStack(7, 2)) == [7, 2]
    assert as_list((5, 6)) == [5, 6]
    mean = token_mean(torch.tensor([[1.0, 3.0, 9.0], [2.0, 0.0, 0.0]]), torch.tensor([[1.0, 1.0, 0.0], [0.0] * 3]))
    assert mean.dtype == np.float64 and mean.tolist() == [2.0, 0.0]  # padding tokens ignored, empty response 0

def test_replay_entropy_pass_takes_the_replayed_rows_and_the_fewest_others_for_an_even_dp_split():
    from verl_ext.trainer.replay import even_split_rows

    keys = ["a", "r1", "b", "r2", "pad", "r3"]
    assert even_split_rows(keys, {"r1", "r2", "r3"}, 1) == [1, 3, 5]
    assert even_split_rows(keys, {"r1", "r2", "r3"}, 2) == [0, 1, 3, 5]  # one other row: 4 rows, 2 per rank
    assert even_split_rows(keys, {"r1", "r2"}, 2) == [1, 3]
    assert even_split_rows(keys, {"r1"}, 3) == [0, 1, 2]
    with pytest.raises(ValueError, match="even split"):
        even_split_rows(["r1", "r2", "r3"], {"r1", "r2", "r3"}, 2)
    with pytest.raises(ValueError, match="found"):
        even_split_rows(keys, {"r9"}, 1)


class _FakeTransferQueue:
    """``kv_batch_get`` / ``kv_batch_put`` over a dict (key -> field -> per-row tensor), jagged fields as verl's."""

    def __init__(self, rows: dict[str, dict[str, torch.Tensor]]):
        self.rows = rows

    def kv_batch_get(self, keys, partition_id, select_fields):
        nested = [torch.nested.as_nested_tensor([self.rows[k][f] for k in keys], layout=torch.jagged)
                  for f in select_fields]
        return TensorDict(dict(zip(select_fields, nested)), batch_size=len(keys))

    def kv_batch_put(self, keys, partition_id, fields, tags=None):
        for name in fields.keys():
            for key, value in zip(keys, fields.get(name).unbind()):
                self.rows[key][name] = value


class _FakeActor:
    """``compute_log_prob`` as verl's worker leaves it: ``log_probs`` (and with ``calculate_entropy`` ``entropy``) over
    prompt + response tokens, one fixed value per row and token whatever rows the pass holds."""

    PROMPT = 2

    def __init__(self, store: _FakeTransferQueue):
        self.store, self.calls = store, []

    def compute_log_prob(self, batch):
        self.calls.append((list(batch.keys), batch.extra_info["calculate_entropy"]))
        for key in batch.keys:
            row, seed = self.store.rows[key], float(sum(map(ord, key)))
            tokens = torch.arange(self.PROMPT + len(row["response_mask"]), dtype=torch.float32)
            row["log_probs"] = -0.01 * tokens - seed / 1000
            if batch.extra_info["calculate_entropy"]:
                row["entropy"] = 0.1 * tokens + seed / 100


def test_replayed_rows_are_recomputed_in_one_pass_for_the_decoupled_weights_and_the_entropy(monkeypatch):
    """Decoupled correction and entropy re-measurement from one forward pass give what each gets from its own."""
    from transfer_queue import KVBatchMeta

    from verl_ext.trainer import replay

    keys, replayed = ["a", "r1", "b", "r2", "r3", "c"], ["r1", "r2", "r3"]
    lengths = {"a": 3, "r1": 2, "b": 4, "r2": 1, "r3": 3, "c": 2}

    def run(decouple: bool, entropy: bool):
        store = _FakeTransferQueue({k: {
            "response_mask": torch.ones(n, dtype=torch.int64), "old_log_probs": torch.full((n,), -0.5 - i / 10),
            "entropy": torch.full((n,), 9.0)} for i, (k, n) in enumerate(lengths.items())})
        monkeypatch.setattr(replay, "tq", store)
        actor = _FakeActor(store)
        train = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train",
                            fields=["response_mask", "old_log_probs", "entropy"], extra_info={})
        metrics = replay.recompute_replayed(actor, train, replayed, decouple=decouple, entropy=entropy, dp_size=2,
                                            temperature=1.0)
        return store.rows, actor.calls, metrics

    both, calls, metrics = run(True, True)
    assert calls == [(keys, True)]  # one pass over the update batch, entropy on
    weights_only, weight_calls, weight_metrics = run(True, False)
    entropy_only, entropy_calls, entropy_metrics = run(False, True)
    assert weight_calls == [(keys, False)] and entropy_calls == [(["a", "r1", "r2", "r3"], True)]  # + 1 for dp 2
    assert metrics == weight_metrics and entropy_metrics == {}
    mu = {k: -0.5 - i / 10 for i, k in enumerate(lengths)}
    for k, n in lengths.items():
        current = (-0.01 * torch.arange(_FakeActor.PROMPT - 1, _FakeActor.PROMPT - 1 + n)  # shifted left by one
                   - sum(map(ord, k)) / 1000)
        if k in replayed:  # π_old = the current policy's, weight π_old / μ per token
            assert torch.allclose(both[k]["old_log_probs"], current)
            assert torch.allclose(both[k]["rollout_is_weights"], torch.exp(current - mu[k]))
            assert both[k]["entropy"].tolist() != [9.0] * n
        else:  # fresh rows keep their old log-probs, weight 1
            assert both[k]["old_log_probs"].tolist() == pytest.approx([mu[k]] * n)
            assert both[k]["rollout_is_weights"].tolist() == [1.0] * n
        for name in ("old_log_probs", "rollout_is_weights"):
            assert torch.equal(both[k][name], weights_only[k][name])
        if k in replayed:
            assert torch.equal(both[k]["entropy"], entropy_only[k]["entropy"])
    tokens = torch.cat([both[k]["rollout_is_weights"] for k in replayed])
    assert metrics["data_selection/replay/is_weight_mean"] == pytest.approx(float(tokens.mean()))
    assert metrics["data_selection/replay/is_weight_max"] == pytest.approx(float(tokens.max()))


def test_validation_n_by_data_source_reaches_the_batch_verl_validates():
    """``data_selection.val_n`` (CBS App. D: avg@16 on AIME, avg@1 on the large sets) becomes the per-prompt
    ``__rollout_n__`` of the batch verl's collate builds, which ``_validate`` reads instead of one ``val_kwargs.n``."""
    import datasets
    from verl.utils.dataset.rl_dataset import collate_fn

    from verl_ext.trainer.mode import with_validation_n

    rows = datasets.Dataset.from_dict({"data_source": ["aime24", "math500", "aime24", "minerva"], "x": [0, 1, 2, 3]})
    out = with_validation_n(rows, {"aime24": 16, "math500": 1}, 4)
    batch = collate_fn([out[i] for i in range(len(out))])
    assert [int(n) for n in batch["__rollout_n__"]] == [16, 1, 16, 4] and list(batch["x"]) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"\['aime25'\]"):
        with_validation_n(rows, {"aime25": 16}, 4)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="integers >= 1"):
            with_validation_n(rows, {"aime24": bad}, 4)


# ------------------------------------------------------------------ metrics
def test_selection_metrics():
    # tasks 7 (4 rollouts, 2 successes), 8 (2 rollouts, all fail), 9 (2 rollouts, all succeed)
    task = np.array([7, 7, 7, 7, 8, 8, 9, 9])
    reward = np.array([1.0, 0.0, 1.0, 0.1, 0.0, 0.0, 1.0, 1.0])
    results = StepResults.from_rewards(task, reward)
    view = RolloutView(task, np.array([0, 0, 0, 0, 1, 1, 2, 2]), reward, np.zeros(8), np.full(8, 5))
    m = selection_metrics(results, view, np.array([4, 2, 2]), np.arange(4),
                          {"selector": {"capability": np.float64(0.25)}, "allocator": {"alpha": 9}})
    assert m["data_selection/effective_task_ratio"] == pytest.approx(1 / 3)
    assert m["data_selection/degenerate_group_rate"] == pytest.approx(2 / 3)
    assert m["data_selection/selected_pass_rate_mean"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert (m["data_selection/rollouts_per_task/min"], m["data_selection/rollouts_per_task/max"]) == (2, 4)
    assert m["data_selection/rollouts_per_task/std"] == pytest.approx(np.std([4, 2, 2]))
    assert m["data_selection/filter_kept_fraction"] == 0.5
    hist = {k.rsplit("/", 1)[1]: v for k, v in m.items() if "/hist/" in k}
    assert list(hist) == ["1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128+"]
    assert hist["2-3"] == pytest.approx(2 / 3) and hist["4-7"] == pytest.approx(1 / 3) and sum(hist.values()) == 1
    assert m["data_selection/selector/capability"] == 0.25 and m["data_selection/allocator/alpha"] == 9.0
    assert all(isinstance(v, float) for v in m.values())


# ------------------------------------------------------------------ config and components
def _config(**over):
    base = {"data": {"train_batch_size": 4, "seed": None, "shuffle": True}, "actor_rollout_ref": {"rollout": {"n": 4}},
            "selector": {"name": "uniform"}, "allocator": {"name": "fixed"}, "rollout_filter": {"name": "keep_all"},
            "data_selection": {"rollout_budget": None, "seed": None, "dump_steps": True}}
    return OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(over))


def test_budget_and_seed_defaults_follow_verl():
    assert rollout_budget(_config()) == 16
    assert rollout_budget(_config(data_selection={"rollout_budget": 24})) == 24
    assert axes_seed(_config()) == torch.Generator().initial_seed()  # verl's unseeded dataloader generator
    assert axes_seed(_config(data={"seed": 3})) == 3
    assert axes_seed(_config(data={"seed": 3}, data_selection={"seed": 5})) == 5


def test_validate_axes_accepts_the_defaults_and_feasible_budgets():
    validate_axes(_config())
    validate_axes(_config(allocator={"name": "variance", "min_n": 2, "max_n": 8},
                          data_selection={"rollout_budget": 30}))


@pytest.mark.parametrize("over, message", [
    ({"selector": {"bogus": 1}}, r"unknown keys \['bogus'\]"),
    ({"allocator": {"name": "nope"}}, "unknown allocator 'nope'"),
    ({"data_selection": {"rollout_budget": 18}}, "not a multiple of 4 tasks"),
    ({"allocator": {"name": "variance", "max_n": 4}, "data_selection": {"rollout_budget": 20}}, "outside"),
    ({"data": {"shuffle": False}}, "use selector=sequential"),
    ({"data_selection": {"rollout_budget": 16.5}}, "must be an integer number of rollouts"),
])
def test_validate_axes_rejects_bad_configs(over, message):
    with pytest.raises(ValueError, match=message):
        validate_axes(_config(**over))


def test_dots_rr_buffer_trims_by_the_selectors_sigma_b_and_replays_after_its_first_round():
    """DOTS+RR: ``fresh_groups`` is the selector's sigma B = int(fresh_fraction x B) and the buffer's first round the
    selector's; checked only for the measured protocol (the authors' rounds)."""
    def dots_rr(fresh_groups, first_round_steps=2, protocol="measured"):
        return _config(selector={"name": "dots", "protocol": protocol, "fresh_fraction": 0.5, "round_steps": 2},
                       rollout_filter={"name": "replay_fifo", "capacity": 4, "fresh_groups": fresh_groups,
                                       "first_round_steps": first_round_steps})

    validate_axes(dots_rr(2))  # B = 4, sigma 0.5
    with pytest.raises(ValueError, match=r"fresh_groups=4 must be the selector's sigma B .* = 2"):
        validate_axes(dots_rr(4))
    with pytest.raises(ValueError, match="first_round_steps=1 must be .* selector.round_steps=2"):
        validate_axes(dots_rr(2, first_round_steps=1))
    validate_axes(dots_rr(4, protocol="in_batch"))  # no rounds: every step serves B


def test_task_pool_reads_stable_indices_and_scalar_columns():
    pool = task_pool([{"index": 30, "split": "train", "weak_pass_rate": 0.5, "tools_kwargs": {}},
                      {"index": 10, "split": "train", "weak_pass_rate": None}])
    assert pool.index.tolist() == [30, 10] and pool.positions(np.array([10])).tolist() == [1]
    assert np.isnan(pool.column("weak_pass_rate")[1]) and pool.column("split").tolist() == ["train", "train"]
    assert "tools_kwargs" not in pool.columns
    with pytest.raises(ValueError, match="extra_info.index"):
        task_pool([{"split": "train"}])


def test_axes_state_round_trip_through_the_checkpoint_file(tmp_path):
    config = _config(selector={"name": "sequential"}, allocator={"name": "variance"})
    pool = task_pool([{"index": i} for i in range(6)])
    axes = build_axes(config, pool)
    axes.selector.select(1, 4)
    axes.allocator.update(1, StepResults.from_rewards([0, 0, 1, 1], [1.0, 0.0, 1.0, 1.0]))
    records.save_state(tmp_path / "global_step_1", {"global_steps": 1, "axes": axes.state_dict()})
    fresh = build_axes(config, pool)
    fresh.load_state_dict(records.load_state(tmp_path / "global_step_1")["axes"])
    assert fresh.selector.select(2, 4).tolist() == axes.selector.select(2, 4).tolist() == [4, 5, 0, 1]
    tasks = np.array([0, 1, 2, 3])
    assert fresh.allocator.allocate(2, tasks, 16).tolist() == axes.allocator.allocate(2, tasks, 16).tolist()
    with pytest.raises(FileNotFoundError, match="not written by the verl_ext trainer"):
        records.load_state(tmp_path / "global_step_9")


def test_read_metrics_merges_per_run_files_later_runs_win(tmp_path):
    first, second = records.metrics_path(tmp_path, 0), records.metrics_path(tmp_path, 2)
    first.parent.mkdir()
    first.write_text("".join(json.dumps({"step": s, "data": {"x": s}}) + "\n" for s in (1, 2, 3)))
    second.write_text(json.dumps({"step": 3, "data": {"x": 30}}) + "\n")
    assert records.read_metrics(tmp_path) == {1: {"x": 1}, 2: {"x": 2}, 3: {"x": 30}}


def test_trainer_module_is_imported_in_ray_processes_after_the_cpu_plugin(monkeypatch):
    from verl_ext.launch.main import export_trainer_module

    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {"runtime_env": {
        "env_vars": {"VERL_USE_EXTERNAL_MODULES": "verl_ext.cpu.plugin"}}}}})
    export_trainer_module(config)
    env_vars = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env_vars.VERL_USE_EXTERNAL_MODULES == "verl_ext.cpu.plugin,verl_ext.trainer"
    assert env_vars.PYTHONPATH.split(":")[0] == str(Path(__file__).resolve().parents[2])
    gpu = OmegaConf.create({"ray_kwargs": {"ray_init": {"runtime_env": {}}}})  # no CPU plugin on GPU machines
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    export_trainer_module(gpu)
    assert gpu.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == "verl_ext.trainer"


def test_join_unique_merges_path_lists_in_order_each_entry_once():
    from verl_ext.cpu import join_unique

    assert join_unique(["/a:/b", None, "", "/b:/c::/a"], ":") == "/a:/b:/c"
    assert join_unique([None, "x,y", "y"], ",") == "x,y" and join_unique([], ",") == ""


def test_training_data_is_checked_against_the_selector_before_start(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from data_prep.schema import make_row

    def write(name, **columns):  # pyarrow directly: our own writer refuses NaN pass rates
        rows = [make_row(data_source="countdown", question=f"q{i}", ability="math", ground_truth="1", index=i,
                         split="train", **{k: v[i] for k, v in columns.items()}) for i in range(3)]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / name)
        return str(tmp_path / name)

    good = write("good.parquet", weak_pass_rate=[0.1, 0.2, 0.3], strong_pass_rate=[0.5, 0.5, 0.5])
    bare = write("bare.parquet")
    nan = write("nan.parquet", weak_pass_rate=[0.1, float("nan"), 0.3], strong_pass_rate=[0.5, 0.5, 0.5])
    bots = {"name": "bots"}
    validate_training_data(_config(selector=bots, data={"train_files": [good]}))
    validate_training_data(_config(selector={**bots, "implicit_weight": 0.0},
                                   data={"train_files": bare}))
    with pytest.raises(ValueError, match=rf"{bare}: selector=bots .*extra_info\.weak_pass_rate"):
        validate_training_data(_config(selector=bots, data={"train_files": [good, bare]}))
    with pytest.raises(ValueError, match=rf"{nan}: extra_info\.weak_pass_rate .* index 1 \(row 1\)"):
        validate_training_data(_config(selector=bots, data={"train_files": nan}))


@pytest.mark.parametrize("loggers, expected", [
    ("console", ["console", "file"]), (["console", "wandb"], ["console", "wandb", "file"]),
    (["file", "console"], ["file", "console"]), ([], ["file"]),
])
def test_every_run_logs_metrics_to_the_jsonl_file(loggers, expected):
    from verl_ext.launch.main import log_to_file

    config = OmegaConf.create({"trainer": {"logger": loggers}})
    log_to_file(config)
    assert list(config.trainer.logger) == expected


def test_measurement_rollouts_are_logged_apart_and_selectors_ask_for_none_by_default():
    from verl_ext.axes import TaskPool, build_selector
    from verl_ext.trainer.measurement import PREFIX, measurement_metrics

    # tasks 7 (never solved), 8 (always), 9 (half): 3 prompts x 2 rollouts
    results = StepResults.from_rewards([7, 7, 8, 8, 9, 9], [0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    assert measurement_metrics(results) == {
        PREFIX + "prompts": 3.0, PREFIX + "rollouts": 6.0, PREFIX + "solve_none": pytest.approx(1 / 3),
        PREFIX + "solve_all": pytest.approx(1 / 3), PREFIX + "degenerate_group_rate": pytest.approx(2 / 3)}
    uniform = build_selector({"name": "uniform"}, TaskPool(np.arange(5), {}), 0)
    assert uniform.measurement(1).tolist() == []  # the trainer then rolls nothing out before selecting
    with pytest.raises(NotImplementedError, match="measures nothing"):
        uniform.measure(1, results)
