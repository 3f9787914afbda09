"""ADS selector (Xu et al., arXiv 2606.22305, §3.2-3.3): the boundary walk's collision rule, the smoothed cluster
distribution, draws, epoch reset, ablations, exact resume, and errors on columns and batch size."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
import torch

from verl_ext.axes import StepResults, TaskPool, build_selector, make_config
from verl_ext.axes.ads import AdsSelector, AdsSelectorConfig, walk_boundary

G = 8  # rollouts per prompt


def clustered_pool(sizes, seed=0, extra=None) -> TaskPool:
    """Clusters of ``sizes`` with ids 10, 20, ..., rows shuffled, per-cluster ranks 0 = easiest."""
    cluster = np.repeat(10 * (1 + np.arange(len(sizes))), sizes)
    rank = np.concatenate([np.arange(n) for n in sizes])
    perm = np.random.default_rng(seed).permutation(len(cluster))
    columns = {"cluster_id": cluster[perm].astype(np.float64), "rank_in_cluster": rank[perm].astype(np.float64),
               "cluster_size": np.repeat(sizes, sizes)[perm].astype(np.float64), **(extra or {})}
    return TaskPool(5000 + 3 * np.arange(len(cluster)), columns)


def results(pool: TaskPool, tasks, rho) -> StepResults:
    """``G`` rollouts per task, ``round(ρ G)`` of them successes."""
    tasks = np.asarray(tasks)
    wins = np.round(np.broadcast_to(np.asarray(rho, dtype=float), tasks.shape) * G).astype(int)
    reward = np.concatenate([np.r_[np.ones(w), np.zeros(G - w)] for w in wins])
    return StepResults.from_rewards(np.repeat(tasks, G), reward)


def ranks(pool: TaskPool, tasks) -> np.ndarray:
    return pool.columns["rank_in_cluster"][pool.positions(np.asarray(tasks))].astype(int)


def clusters(pool: TaskPool, tasks) -> np.ndarray:
    return pool.columns["cluster_id"][pool.positions(np.asarray(tasks))].astype(int)


# ---------------------------------------------------------------------------------------- boundary walk
# Expected values worked by hand from the authors' rule (Richard-zrx/ADS ads_sampler.py, _nearest_free):
# stayers first, easier movers ascending, harder movers descending; each takes the free slot nearest to
# its neighbour s + move, trying distance 1, 2, ... from it, the requested direction first.
@pytest.mark.parametrize("positions, move, size, expected", [
    ([4, 5, 6, 7], [-1, -1, -1, -1], 10, [3, 4, 5, 6]),  # window slides easier: vacated slots are free
    ([4, 5, 6, 7], [1, 1, 1, 1], 10, [5, 6, 7, 8]),  # and harder
    ([3, 4, 5], [0, -1, 0], 10, [2, 3, 5]),  # 4's neighbour 3 held by a stayer: two away, 2
    ([3, 4, 5], [1, 0, 0], 10, [3, 4, 5]),  # the case: 4 and 5 (two away) held, so 3 keeps its own
    ([2, 3, 4], [-1, 0, 0], 10, [1, 3, 4]),  # free neighbour: taken
    ([1, 2, 3], [0, 0, -1], 10, [1, 2, 3]),  # 2 and 1 held: 3 stays (no jump to 0, three away)
    ([4, 5], [1, -1], 10, [4, 5]),  # crossing movers swap (Eq. 6 is a bijection here)
    ([2, 3, 7], [0, -1, 1], 10, [1, 2, 8]),  # 3 passes the stayer at 2; 7 -> 8
    ([0, 1, 2], [-1, -1, -1], 10, [0, 1, 2]),  # easiest edge: the clamped neighbour is 0, everyone stays
    ([3, 4, 5], [1, 1, 1], 6, [3, 4, 5]),  # hardest edge
    ([0, 1, 2], [1, -1, 1], 3, [0, 1, 2]),  # cluster no larger than the mini-cluster: always all of it
    ([0, 5], [-1, 1], 6, [0, 5]),  # both edges: stay
])
def test_walk_boundary_hand_built(positions, move, size, expected):
    assert walk_boundary(np.array(positions), np.array(move), size).tolist() == expected


def test_walk_boundary_resolution_order_and_wider_search():
    # stayers 1, 2; easier movers ascending: 3 finds 2 and 1 held and keeps 3; 4 finds 3 and 2 held and keeps 4
    assert walk_boundary(np.array([1, 2, 3, 4]), np.array([0, 0, -1, -1]), 8).tolist() == [1, 2, 3, 4]
    # an easier mover takes a harder mover's slot (4 -> 3); the harder mover takes the slot it left
    assert walk_boundary(np.array([3, 4, 5]), np.array([1, -1, 0]), 6).tolist() == [3, 4, 5]
    # stayers 2, 6; easier 1 -> 0, easier 3 -> 2 held -> 1; harder 4 -> 5; harder 0: 1, 2 and its own 0 held,
    # so distance 2 from its neighbour 1: 3 (free, harder side first)
    assert walk_boundary(np.array([0, 1, 2, 3, 4, 6]), np.array([1, -1, 0, -1, 1, 0]), 7).tolist() \
        == [0, 1, 2, 3, 5, 6]
    # stayers 2, 4, 7; easier 3 -> 2 held -> 1; easier 5 -> 4 held -> 3; harder 1: 2, 3 and its own 1 held,
    # distance 2 from 2: 4 held, then 0 on the easier side
    assert walk_boundary(np.array([1, 2, 3, 4, 5, 7]), np.array([1, 0, -1, 0, -1, 0]), 8).tolist() \
        == [0, 1, 2, 3, 4, 7]


def test_walk_boundary_invariants_and_paper_rule_when_collision_free():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        size = int(rng.integers(1, 14))
        positions = np.sort(rng.choice(size, int(rng.integers(1, size + 1)), replace=False))
        move = rng.integers(-1, 2, len(positions))
        new = walk_boundary(positions, move, size)
        assert len(np.unique(new)) == len(positions) and new.min() >= 0 and new.max() < size
        paper = positions + move  # Eq. 6: the neighbour in the difficulty order
        if paper.min() >= 0 and paper.max() < size and len(np.unique(paper)) == len(paper):
            assert new.tolist() == np.sort(paper).tolist()


# ---------------------------------------------------------------------------------------- selection and update
def test_first_step_serves_the_easiest_b_of_drawn_clusters_and_small_clusters_whole():
    pool = clustered_pool([12, 3, 9, 20])
    sel = AdsSelector(AdsSelectorConfig(clusters_per_step=4, mini_cluster_size=4), pool, seed=0)
    tasks = sel.select(1, 16)
    assert len(tasks) == 4 + 3 + 4 + 4 == len(set(tasks.tolist()))  # cluster 20 has only 3: fewer than 16
    drawn = [int(c) for c in sel.cluster_ids[sel.drawn]]  # in draw order, each cluster easiest first
    expected = [(c, r) for c in drawn for r in range(3 if c == 20 else 4)]
    assert list(zip(clusters(pool, tasks).tolist(), ranks(pool, tasks).tolist())) == expected
    sel.update(1, results(pool, tasks, 1.0))  # all too easy: every mini-cluster slides one harder
    assert ranks(pool, sel.members(1)).tolist() == [0, 1, 2]  # ... except the cluster of 3, all of it
    for slot in (0, 2, 3):
        assert ranks(pool, sel.members(slot)).tolist() == [1, 2, 3, 4]
    assert sel.metrics()["boundary_moved"] == 3.0


def test_update_moves_per_band_and_rates_are_means_over_prompts():
    pool = clustered_pool([10, 10])
    sel = AdsSelector(AdsSelectorConfig(clusters_per_step=2, mini_cluster_size=4), pool, seed=0)
    sel.select(1, 8)
    a = sel.members(0)  # ranks 0..3
    # rank 0 too hard (1/8), rank 1 inside (3/8 >= 0.33), rank 2 inside (5/8 <= 0.67), rank 3 too easy (6/8)
    rho = np.array([1, 3, 5, 6]) / 8
    sel.update(1, results(pool, a, rho))  # cluster 20 not in the results: r carried, boundary kept
    assert ranks(pool, sel.members(0)).tolist() == [0, 1, 2, 4]  # rank 0 cannot go easier; 3 -> 4
    assert ranks(pool, sel.members(1)).tolist() == [0, 1, 2, 3]
    assert sel.r.tolist() == pytest.approx([rho.mean(), 0.5])
    # a prompt of cluster 20 outside its mini-cluster counts for r_20 but moves nothing
    outside = pool.index[sel.orders[1][7]]
    sel.update(2, results(pool, [outside], 0.0))
    assert sel.r[1] == 0.0 and ranks(pool, sel.members(1)).tolist() == [0, 1, 2, 3]


def test_ema_update_and_renormalisation_including_all_zero_rates():
    pool = clustered_pool([4, 4, 4])
    cfg = AdsSelectorConfig(clusters_per_step=1, mini_cluster_size=4)
    sel = AdsSelector(cfg, pool, seed=0)
    sel.select(1, 4)
    tasks = np.concatenate([sel.members(k) for k in range(3)])
    sel.update(1, results(pool, tasks, np.repeat([0.25, 0.5, 1.0], 4)))
    r = np.array([0.25, 0.5, 1.0])
    expected = 0.7 * np.full(3, 1 / 3) + 0.3 * r / r.sum()
    np.testing.assert_allclose(sel.p, expected / expected.sum(), rtol=1e-12)
    assert sel.p.sum() == pytest.approx(1.0, abs=1e-15)
    sel.update(2, results(pool, tasks, 0.0))  # every r = 0: the target is uniform
    np.testing.assert_allclose(sel.p, 0.7 * expected + 0.3 / 3, rtol=1e-12)
    np.testing.assert_array_equal(sel.r, 0.0)
    for _ in range(200):
        sel.update(3, results(pool, tasks, 0.0))
    np.testing.assert_allclose(sel.p, 1 / 3, rtol=1e-9)
    m = sel.metrics()
    assert m["p_entropy"] == pytest.approx(np.log(3)) and m["p_max"] == pytest.approx(1 / 3)
    assert {"cluster_prob/10", "cluster_prob/20", "cluster_prob/30", "drawn_success_mean", "success_mean", "in_band_fraction"} <= set(m)


def test_draws_are_without_replacement_and_follow_p():
    pool = clustered_pool([2] * 4)
    p = np.array([0.5, 0.3, 0.15, 0.05])
    for c in (1, 2):
        sel = AdsSelector(AdsSelectorConfig(clusters_per_step=c, mini_cluster_size=2, epoch_steps=0), pool, seed=3)
        sel.p = p.copy()
        first, pairs, n = np.zeros(4), np.zeros(4), 2000
        for step in range(n):
            tasks = sel.select(step, 2 * c)
            assert len(set(clusters(pool, tasks).tolist())) == c
            first[sel.drawn[0]] += 1
            pairs[sel.drawn] += 1
        # first draw ~ p; with c = 2 a cluster is in the pair with prob p_k + sum_j p_j p_k / (1 - p_j)
        assert np.all(np.abs(first / n - p) <= 4 * np.sqrt(p * (1 - p) / n)), first / n
        if c == 2:
            inclusion = p + np.array([sum(p[j] * p[k] / (1 - p[j]) for j in range(4) if j != k) for k in range(4)])
            assert np.all(np.abs(pairs / n - inclusion) <= 4 * np.sqrt(inclusion * (1 - inclusion) / n)), pairs / n


def test_epoch_reset_counts_selects():
    pool = clustered_pool([10, 10, 10, 10])  # |D| = 40, batch 2 x 4 = 8: 5 selects per epoch
    sel = AdsSelector(AdsSelectorConfig(clusters_per_step=2, mini_cluster_size=4), pool, seed=1)
    assert sel.epoch_steps == 5
    for step in range(1, 6):
        tasks = sel.select(step, 8)
        sel.update(step, results(pool, tasks, 1.0))
        assert (sel.epoch, sel.metrics()["epoch_step"]) == (0, step)
    assert not np.allclose(sel.p, 0.25) and sel.r.max() == 1.0
    assert any(ranks(pool, sel.members(k))[0] > 0 for k in range(4))
    tasks = sel.select(6, 8)  # starts epoch 1 from the initial state
    assert (sel.epoch, sel.epoch_step, sel.metrics()["epoch"]) == (1, 1, 1.0)
    np.testing.assert_array_equal(sel.p, 0.25)
    np.testing.assert_array_equal(sel.r, 0.5)
    assert all(ranks(pool, sel.members(k)).tolist() == [0, 1, 2, 3] for k in range(4))
    assert sorted(ranks(pool, tasks).tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]
    never = AdsSelector(AdsSelectorConfig(clusters_per_step=2, mini_cluster_size=4, epoch_steps=0), pool, 1)
    for step in range(1, 12):
        never.select(step, 8)
    assert never.epoch == 0


def test_policy_that_solves_easy_prompts_moves_boundaries_to_pass_rate_half():
    """Tasks solved iff easier than a per-cluster skill: boundaries walk up to the skill and stay near it."""
    sizes = [40, 40, 40, 40]
    pool = clustered_pool(sizes, seed=2)
    skill = {10: 5, 20: 12, 30: 20, 40: 30}
    sel = AdsSelector(AdsSelectorConfig(clusters_per_step=4, mini_cluster_size=4, epoch_steps=0), pool, seed=0)
    for step in range(1, 40):
        tasks = sel.select(step, 16)
        cid, rk = clusters(pool, tasks), ranks(pool, tasks)
        gap = rk - np.array([skill[c] for c in cid])
        sel.update(step, results(pool, tasks, np.clip(0.5 - gap / 8, 0, 1)))  # 0.5 at the skill
    for slot, cid in enumerate(sel.cluster_ids):
        assert abs(np.mean(ranks(pool, sel.members(slot))) - skill[int(cid)]) <= 2.5


# ---------------------------------------------------------------------------------------- ablations
def test_no_inter_walks_one_global_order():
    sizes = [6, 12]
    difficulty = np.random.default_rng(5).permutation(18).astype(float)
    pool = clustered_pool(sizes, extra={"nll": difficulty})
    cfg = make_config("selector", {"name": "ads", "inter_cluster": False, "clusters_per_step": 1,
                                   "mini_cluster_size": 6})
    sel = AdsSelector(cfg, pool, 0)
    assert len(sel.cluster_ids) == 1 and sel.sizes.tolist() == [18] and sel.epoch_steps == 3
    tasks = sel.select(1, 6)
    # quantile order: cluster 10 ranks 0..5 at (r + 0.5) / 6, cluster 20 ranks at (r + 0.5) / 12
    q = (ranks(pool, tasks) + 0.5) / np.where(clusters(pool, tasks) == 10, 6, 12)
    assert np.all(np.diff(q) >= 0) and q.max() < 0.3
    sel.update(1, results(pool, tasks, 1.0))
    assert np.all((ranks(pool, sel.members(0)) + 0.5) / np.where(clusters(pool, sel.members(0)) == 10, 6, 12)
                  >= q.min())
    np.testing.assert_array_equal(sel.p, [1.0])
    by_nll = AdsSelector(replace(cfg, global_order_column="nll"), pool, 0)
    tasks = by_nll.select(1, 6)
    assert difficulty[pool.positions(tasks)].tolist() == [0, 1, 2, 3, 4, 5]
    bare = TaskPool(pool.index, {"nll": difficulty})  # cluster and rank columns are not read
    assert len(AdsSelector(replace(cfg, global_order_column="nll"), bare, 0).select(1, 6)) == 6
    with pytest.raises(ValueError, match="clusters_per_step=4 must be 1"):
        AdsSelectorConfig(inter_cluster=False)


def test_no_intra_draws_random_members_and_adapts_p():
    pool = clustered_pool([30, 30, 30])
    pool = TaskPool(pool.index, {"cluster_id": pool.columns["cluster_id"]})  # no rank column needed
    sel = build_selector({"name": "ads", "intra_cluster": False, "clusters_per_step": 1, "mini_cluster_size": 8},
                         pool, 4)
    seen = set()
    for step in range(1, 6):
        tasks = sel.select(step, 8)
        assert len(set(tasks.tolist())) == 8 and len(set(clusters(pool, tasks).tolist())) == 1
        seen |= set(tasks.tolist())
        sel.update(step, results(pool, tasks, 1.0 if clusters(pool, tasks)[0] == 10 else 0.0))
    assert len(seen) > 16  # fresh members each step, not a fixed boundary
    assert "boundary_quantile_mean" not in sel.metrics() and sel.metrics()["boundary_moved"] == 0.0
    assert not np.allclose(sel.p, 1 / 3)  # p adapts from the cluster rates


def test_presets_compose_to_the_ablations():
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    import verl_ext

    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config" / "selector"), version_base=None):
        made = {n: make_config("selector", compose(n)) for n in ("ads", "ads_no_inter", "ads_no_intra")}
    assert made["ads"] == AdsSelectorConfig()  # the YAML spells out the dataclass defaults
    assert made["ads_no_inter"] == AdsSelectorConfig(inter_cluster=False, clusters_per_step=1, mini_cluster_size=128,
                                                     global_order_column="difficulty")
    assert made["ads_no_intra"] == replace(AdsSelectorConfig(), intra_cluster=False)


# ---------------------------------------------------------------------------------------- state and errors
def test_exact_resume():
    pool = clustered_pool([9, 14, 7, 20, 11])
    cfg = AdsSelectorConfig(clusters_per_step=2, mini_cluster_size=5)  # 61 // 10: epochs of 6 selects

    def step(sel, s, rng):
        tasks = sel.select(s, 10)
        sel.update(s, results(pool, tasks, rng.integers(0, G + 1, len(tasks)) / G))
        return tasks.tolist()

    whole, rng_a = AdsSelector(cfg, pool, seed=11), np.random.default_rng(0)
    run = [step(whole, s, rng_a) for s in range(1, 16)]
    first, rng_b = AdsSelector(cfg, pool, seed=11), np.random.default_rng(0)
    head = [step(first, s, rng_b) for s in range(1, 8)]
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = AdsSelector(cfg, pool, seed=999)  # the seed comes back with the RNG state
    resumed.load_state_dict(torch.load(buf, weights_only=False))
    tail = [step(resumed, s, rng_b) for s in range(8, 16)]
    assert head + tail == run
    np.testing.assert_array_equal(resumed.p, whole.p)
    assert resumed.metrics() == whole.metrics()
    with pytest.raises(ValueError, match="mini-clusters do not fit"):
        AdsSelector(replace(cfg, mini_cluster_size=6), pool, 0).load_state_dict(first.state_dict())
    with pytest.raises(ValueError, match="differ from the training data"):
        AdsSelector(cfg, clustered_pool([9, 14, 7, 20, 12]), 0).load_state_dict(first.state_dict())


def test_columns_missing_or_bad_and_configurable():
    pool = clustered_pool([5, 5])
    with pytest.raises(ValueError, match=r"extra_info\.cluster_id"):
        AdsSelector(AdsSelectorConfig(clusters_per_step=1, mini_cluster_size=2), TaskPool(pool.index, {}), 0)
    with pytest.raises(ValueError, match=r"extra_info\.rank_in_cluster"):
        AdsSelector(AdsSelectorConfig(clusters_per_step=1), TaskPool(pool.index, {"cluster_id": pool.columns[
            "cluster_id"]}), 0)
    cross = TaskPool(pool.index, {"qwen_cluster": pool.columns["cluster_id"], "qwen_rank": pool.columns[
        "rank_in_cluster"]})
    sel = build_selector({"name": "ads", "cluster_column": "qwen_cluster", "rank_column": "qwen_rank",
                          "clusters_per_step": 2, "mini_cluster_size": 2}, cross, 0)
    assert sorted(ranks(pool, sel.select(1, 4)).tolist()) == [0, 0, 1, 1]

    def with_column(name, values):
        return TaskPool(pool.index, {**pool.columns, name: values})

    nan = pool.columns["cluster_id"].copy()
    nan[3] = np.nan
    cfg = AdsSelectorConfig(clusters_per_step=1, mini_cluster_size=2)
    with pytest.raises(ValueError, match=r"cluster_id \(cluster id\) is missing or not finite for 1 of 10.*index 5009"):
        AdsSelector(cfg, with_column("cluster_id", nan), 0)
    with pytest.raises(ValueError, match="must hold integers"):
        AdsSelector(cfg, with_column("cluster_id", pool.columns["cluster_id"] + 0.5), 0)
    with pytest.raises(ValueError, match="not numeric"):
        AdsSelector(cfg, with_column("cluster_id", np.array(["a"] * 10, dtype=object)), 0)
    tied = pool.columns["rank_in_cluster"] % 4  # ranks 0 and 4 of each cluster collide
    with pytest.raises(ValueError, match=r"rank_in_cluster repeats within a cluster \(2 ties\)"):
        AdsSelector(cfg, with_column("rank_in_cluster", tied), 0)
    gaps = pool.columns["rank_in_cluster"] * 10 + 7  # gaps (a filtered file): only the order matters
    assert ranks(pool, AdsSelector(cfg, with_column("rank_in_cluster", gaps), 0).select(1, 2)).tolist() == [0, 1]
    with pytest.raises(ValueError, match="clusters_per_step=3 exceeds the 2 clusters"):
        AdsSelector(AdsSelectorConfig(clusters_per_step=3, mini_cluster_size=2), pool, 0)


def test_batch_too_small_and_bad_config():
    pool = clustered_pool([40] * 4)
    sel = AdsSelector(AdsSelectorConfig(), pool, 0)
    with pytest.raises(ValueError, match=r"4 x 32 = 128 prompts exceed the batch of 100 tasks"):
        sel.select(1, 100)
    assert len(sel.select(1, 256)) == 128  # a larger trainer batch: ADS still serves its 128
    for bad in ({"epsilon": 0.6}, {"alpha": -0.1}, {"mini_cluster_size": 0}, {"epoch_steps": -1},
                {"global_order_column": "nll"}):
        with pytest.raises(ValueError, match="selector=ads"):
            AdsSelectorConfig(**bad)
    with pytest.raises(ValueError, match=r"unknown keys \['B'\]"):
        make_config("selector", {"name": "ads", "B": 32})


def test_per_cluster_metrics_only_up_to_64_clusters():
    many = AdsSelector(AdsSelectorConfig(clusters_per_step=1, mini_cluster_size=1), clustered_pool([1] * 65), 0)
    many.select(1, 1)
    assert not any(k.startswith("cluster_prob/") for k in many.metrics())
    few = AdsSelector(AdsSelectorConfig(clusters_per_step=2, mini_cluster_size=1), clustered_pool([1] * 64), 0)
    tasks = few.select(1, 2)
    m = few.metrics()
    assert sum(k.startswith("cluster_prob/") for k in m) == 64 and m["prompts"] == 2.0
    assert [m["drawn/0"], m["drawn/1"]] == clusters(few.pool, tasks).astype(float).tolist()
    assert all(isinstance(v, float) and np.isfinite(v) for v in m.values())
