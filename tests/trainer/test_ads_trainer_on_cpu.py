"""ADS and DOTS+RR through the real trainer, from a dataset preprocessed by ``python -m data_prep.ads_clusters``.

Nine tasks on three topics (cooking 4, astronomy 3, football 2) whose scripted rewards follow the topic (cooking
always right, astronomy a coin that alternates, football always wrong). The preprocessing embeds prompt +
reference solution with MiniLM and writes its clusters as ``minilm_*`` columns (cross-policy clusters: the
difficulty order comes from the embedded policy, the clusters from another model), K = 3: the clusters are the
topics. Two runs of 3 steps, 4 rollouts per prompt:

* **ADS** on the ``minilm_`` columns, 2 clusters per step with mini-clusters of B = 3, so a step serves 6 prompts,
  or 5 when the 2-task football cluster is drawn (the step budget scales with the prompts served), and the
  all-wrong groups are dropped from the gradient batch (``drop_degenerate``, ``drop=all_wrong``: the paper's
  code variant). A fresh selector replayed on the run's recorded rewards chooses exactly what the run chose. It
  trains at 8 tokens and validates (before training) at the rollout's 32, as the recipes train at 8,192 and validate
  at 14,336 (:mod:`verl_ext.trainer.generation_length`).
* **DOTS+RR**: ``selector=dots protocol=measured`` (the authors' rounds, one step each here) on the embeddings file
  the preprocessing wrote with ``replay_fifo`` (its trim and first round the selector's: sigma B = 3, one step):
  every step first rolls 3 reference prompts out for measurement only
  (scored, never trained on, logged apart), then targets the prompts predicted closest to difficulty 0.5 (6 in the
  first round, 3 after); replay-equal selections and measurements; once an astronomy prompt was measured, the
  astronomy prompts (predicted ≈ 0.5 through their MiniLM similarity) are all targeted; mixed-reward groups of
  earlier steps join the actor update (one mini-batch) under the authors' decoupled loss: their old log-probs are
  the current policy's, not the stored ones, with weights π_old/μ.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.trainer.scenario import REWARD, axis_overrides, common_overrides, run
from verl_ext.axes import StepResults, TaskPool, build_selector
from verl_ext.trainer import records
from verl_ext.trainer.generation_length import AGENT_LOOP

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

STEPS, SEED, N, TASKS = 3, 2, 4, 6
TRAIN_LENGTH, VAL_LENGTH = 8, 32  # the ADS run trains at 8 tokens and validates at 32 (the recipes: 8,192 / 14,336)
TOPICS = {  # topic: (scripted reward kind, [(question, reference solution)])
    "cooking": ("easy", [
        ("How many minutes should I boil an egg for a soft yolk?", "Boil the egg for 6 minutes."),
        ("At what oven temperature should I bake a loaf of bread?", "Bake the bread at 230 degrees Celsius."),
        ("How much salt goes into a pot of pasta water?", "Add 10 grams of salt per litre of water."),
        ("How long does a whole chicken need to roast in the oven?", "Roast the chicken for 80 minutes."),
    ]),
    "astronomy": ("coin", [
        ("How far away from the Earth is the Moon?", "The Moon is about 384,400 kilometres away."),
        ("How many planets orbit the Sun?", "Eight planets orbit the Sun."),
        ("How many moons does the planet Jupiter have?", "Jupiter has 95 known moons."),
    ]),
    "football": ("hard", [
        ("How many players does a football team have on the pitch?", "Eleven players per team."),
        ("How long does a professional football match last?", "Two halves of 45 minutes: 90 minutes."),
    ]),
}
ADS = {"name": "ads", "clusters_per_step": 2, "mini_cluster_size": 3, "epoch_steps": 0,
       "cluster_column": "minilm_cluster_id", "rank_column": "minilm_rank_in_cluster"}
DOTS = {"name": "dots", "reference_size": 3, "temperature": 0.0, "protocol": "measured", "round_steps": 1,
        "fresh_fraction": 0.5}


def _rows():
    from data_prep.schema import make_row

    rows = []
    for topic, (kind, items) in TOPICS.items():
        for question, solution in items:
            i = len(rows)
            rows.append(make_row(data_source="scenario", question=question, ability="test", ground_truth=str(i),
                                 index=300 + i, split="train", kind=kind, topic=topic, solution=solution))
    return rows


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The training parquet with ``minilm_*`` cluster columns, the embeddings file and the reward module."""
    from data_prep import ads_clusters
    from data_prep.schema import write_rows

    root = tmp_path_factory.mktemp("ads")
    rows = _rows()
    write_rows(rows, root / "raw.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    out = root / "train.parquet"
    assert ads_clusters.main(["--input", str(root / "raw.parquet"), "--out", str(out), "--model", "embedded:2",
                              "--embedder", "minilm", "--prefix", "minilm_", "--clusters", "3"]) == 0
    summary = json.loads(out.with_suffix(".minilm_clusters.json").read_text())
    return {"train": str(out), "test": str(root / "test.parquet"), "reward": str(root / "reward.py"),
            "embeddings": summary["embeddings"], "root": root}


def _trainer_run(prepared, name: str, selector: dict, *extra: str, mini: int = 3) -> Path:
    run_dir = prepared["root"] / name
    overrides = common_overrides(prepared, run_dir, STEPS, tasks=TASKS, n=N, mini=mini) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={run_dir}/coin_counts.json", f"data.seed={SEED}",
        *axis_overrides("selector", selector), *extra]
    run("verl_ext.main", overrides, prepared["root"] / f"{name}.log")
    return run_dir


@pytest.fixture(scope="module")
def ads_run(prepared):
    val_dir = prepared["root"] / "ads_validation"
    return _trainer_run(prepared, "ads", ADS, "rollout_filter=drop_degenerate", "rollout_filter.drop=all_wrong",
                        f"data.max_response_length={TRAIN_LENGTH}",
                        f"actor_rollout_ref.rollout.response_length={VAL_LENGTH}",
                        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP}",
                        "trainer.val_before_train=true", f"trainer.validation_data_dir={val_dir}")


@pytest.fixture(scope="module")
def dots_run(prepared):
    return _trainer_run(prepared, "dots", DOTS, f"selector.embedding_file={prepared['embeddings']}",
                        "rollout_filter=replay_fifo", "rollout_filter.fraction=0.25",
                        f"rollout_filter.fresh_groups={int(DOTS['fresh_fraction'] * TASKS)}",  # sigma B
                        f"rollout_filter.first_round_steps={DOTS['round_steps']}", mini=TASKS)


def _pool(train: str) -> TaskPool:
    from data_prep.schema import read_rows

    rows = read_rows(Path(train))
    columns = {c: np.array([r["extra_info"][c] for r in rows], dtype=float)
               for c in ("minilm_cluster_id", "minilm_rank_in_cluster")}
    return TaskPool(np.array([r["extra_info"]["index"] for r in rows]), columns)


def _topic_of(train: str) -> dict[int, str]:
    from data_prep.schema import read_rows

    return {r["extra_info"]["index"]: r["extra_info"]["topic"] for r in read_rows(Path(train))}


def test_minilm_clusters_are_the_topics(prepared):
    from data_prep.schema import read_rows

    rows = read_rows(Path(prepared["train"]))
    clusters = {}
    for r in rows:
        clusters.setdefault(r["extra_info"]["minilm_cluster_id"], set()).add(r["extra_info"]["topic"])
    assert sorted(map(sorted, clusters.values())) == [["astronomy"], ["cooking"], ["football"]]
    assert all("cluster_id" not in r["extra_info"] for r in rows)  # only the prefixed (cross-policy) columns


def test_ads_steps_serve_the_chosen_prompts_and_drop_all_wrong_groups(prepared, ads_run):
    topic = _topic_of(prepared["train"])
    dumps = records.read_dumps(ads_run)
    assert sorted(dumps) == list(range(1, STEPS + 1))
    sizes = {len(d["tasks"]) for d in dumps.values()}
    assert sizes <= {5, 6} and 5 in sizes  # the 2-task football cluster was drawn at least once
    for d in dumps.values():
        assert d["counts"] == [N] * len(d["tasks"])  # budget 24 scaled to the prompts chosen
        assert sorted(d["rollout_task"]) == sorted(t for t in d["tasks"] for _ in range(N))
        wrong = [topic[t] == "football" for t in d["rollout_task"]]
        assert d["kept"] == [p for p, w in enumerate(wrong) if not w]  # all-wrong groups leave the gradient batch
        assert sorted({p for p in d["actor_update"]["pos"] if p >= 0}) == d["kept"]


def test_ads_trains_at_its_length_and_validates_at_the_rollouts_longer_one(prepared, ads_run):
    """Training rows (``data.max_response_length``) stop at 8 tokens, validation at the rollout's 32: the truncated
    model rarely stops by itself, so both caps bind."""
    from transformers import AutoTokenizer

    from tests.trainer.scenario import model_path

    dumps = records.read_dumps(ads_run).values()
    lengths = [n for d in dumps for n in d["rollout_length"]]
    assert max(lengths) == TRAIN_LENGTH and len(lengths) == sum(len(d["rollout_task"]) for d in dumps)
    tokenizer = AutoTokenizer.from_pretrained(model_path())
    (dump,) = sorted((prepared["root"] / "ads_validation").glob("*.jsonl"))  # val_before_train: step 0
    outputs = [json.loads(line)["output"] for line in dump.read_text().splitlines()]
    val_lengths = [len(tokenizer(o, add_special_tokens=False)["input_ids"]) for o in outputs]
    assert outputs and max(val_lengths) > 2 * TRAIN_LENGTH, val_lengths


def test_ads_replayed_selector_chooses_what_the_run_chose(prepared, ads_run):
    selector = build_selector(ADS, _pool(prepared["train"]), SEED)
    for step, d in sorted(records.read_dumps(ads_run).items()):
        assert selector.select(step, TASKS).tolist() == d["tasks"], step
        selector.update(step, StepResults.from_rewards(d["rollout_task"], d["rollout_reward"]))


def test_ads_cluster_distribution_is_logged_and_plotted(ads_run, tmp_path):
    from eval.plots import CLUSTER_PREFIX, cluster_probs
    from eval.run_logs import Run

    run_ = Run("ads", ads_run)
    for step in range(1, STEPS + 1):
        probs = [run_.metrics[step][f"{CLUSTER_PREFIX}{c}"] for c in (0, 1, 2)]
        assert sum(probs) == pytest.approx(1.0) and min(probs) > 0
    (path,) = cluster_probs({"ads": run_}, tmp_path)
    assert path.stat().st_size > 0


def test_dots_measures_its_reference_set_apart_and_never_trains_on_it(dots_run):
    dumps, metrics = records.read_dumps(dots_run), records.read_metrics(dots_run)
    reference = DOTS["reference_size"]
    for step, d in sorted(dumps.items()):
        measured = d["measurement"]
        assert len(measured["rollout_task"]) == reference * N and len(set(measured["rollout_task"])) == reference
        assert metrics[step]["data_selection/measurement/rollouts"] == reference * N
        assert metrics[step]["data_selection/measurement/prompts"] == reference
        # the step trained on its selected prompts' rollouts only: the measurement rows left TransferQueue
        assert sorted(d["rollout_task"]) == sorted(t for t, c in zip(d["tasks"], d["counts"]) for _ in range(c))
        assert len(d["tasks"]) == (TASKS if step == 1 else int(DOTS["fresh_fraction"] * TASKS))
        assert metrics[step]["timing_s/measurement"] > 0


def test_dots_replayed_selector_measures_and_chooses_what_the_run_chose_and_targets_the_coin_topic(prepared,
                                                                                                  dots_run):
    topic = _topic_of(prepared["train"])
    pool = _pool(prepared["train"])
    selector = build_selector({**DOTS, "embedding_file": prepared["embeddings"]}, pool, SEED)
    targeted_after_coin = 0
    for step, d in sorted(records.read_dumps(dots_run).items()):
        measured = d["measurement"]
        assert sorted(selector.measurement(step).tolist()) == sorted(set(measured["rollout_task"])), step
        selector.measure(step, StepResults.from_rewards(measured["rollout_task"], measured["rollout_reward"]))
        assert selector.select(step, TASKS).tolist() == d["tasks"], step
        if any(topic[t] == "astronomy" for t in measured["rollout_task"]):  # astronomy predicted nearest 0.5
            assert {t for t in topic if topic[t] == "astronomy"} <= set(d["tasks"]), step
            targeted_after_coin += 1
        selector.update(step, StepResults.from_rewards(d["rollout_task"], d["rollout_reward"]))
    assert targeted_after_coin >= 1


def test_dots_rr_replays_informative_rollouts_of_earlier_steps(dots_run):
    dumps = records.read_dumps(dots_run)
    ids = {rid: (step, adv) for step, d in dumps.items() for rid, adv in zip(d["rollout_id"], d["rollout_advantage"])}
    replayed = [(step, rid) for step, d in dumps.items() for rid in d["replayed"]]
    assert replayed and all(rid >> 32 < step for step, rid in replayed)  # from earlier steps
    assert all(ids[rid][1] != 0 for _, rid in replayed)  # informative (non-zero advantage) rollouts only
    for d in dumps.values():
        fresh = len(d["rollout_task"])
        assert sorted({p for p in d["actor_update"]["pos"] if p >= 0}) == list(range(fresh + len(d["replayed"])))


def test_dots_rr_replayed_rows_train_against_the_current_policy_weighted_by_pi_old_over_mu(dots_run):
    """In the first mini-batch of an update every row's ratio is exactly on-policy, the replayed ones too (their
    old log-probs π_old recomputed by the current policy), while the log-probs stored at their generation (μ)
    differ; the logged weights π_old/μ differ from 1."""
    from eval.run_logs import Run
    from verl_ext.trainer.batching import mini_batch_of_rows

    dumps = records.read_dumps(dots_run)
    by_id = {rid: (step, i) for step, d in dumps.items() for i, rid in enumerate(d["rollout_id"])}
    first_mb_replayed, gaps = 0, []
    for step, d in dumps.items():
        update, fresh = d["actor_update"], len(d["rollout_task"])
        first = mini_batch_of_rows(len(update["pos"]), d["actor_mini_batches"]["size"], 1) == 0
        for i, p in enumerate(update["pos"]):
            if p < 0:
                continue
            if first[i]:  # no optimiser step yet: the current policy is the one that computed old_log_prob
                assert update["log_prob"][i] == pytest.approx(update["old_log_prob"][i], abs=1e-4), (step, p)
                first_mb_replayed += p >= fresh
            if p >= fresh:
                born, j = by_id[d["replayed"][p - fresh]]
                gaps.append(abs(update["old_log_prob"][i] - dumps[born]["rollout_old_log_prob"][j]))
    assert first_mb_replayed > 0
    assert gaps and max(gaps) > 1e-3, gaps  # the stored μ is not what the loss used as old log-prob
    metrics = Run("dots", dots_run).metrics
    weights = [metrics[s]["data_selection/replay/is_weight_mean"] for s in dumps if dumps[s]["replayed"]]
    assert weights and all(w > 0 for w in weights) and any(abs(w - 1) > 1e-4 for w in weights)
