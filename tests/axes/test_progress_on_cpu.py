"""Progress-aware bucket sampling and prompt-level utility (verl_ext/axes/progress.py; Yan, "Progress-Aware Prompt
Sampling", CS224R, §3.2-3.3): learning progress, informativeness and the capped / density-ratio distributions against
hand computations, the bounded distribution against a brute-force KL projection and an LP feasibility check, sampling
frequencies, degenerate groups, the presets' paper values (§3.3, App. A Table 5), resume."""

import copy
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.special import rel_entr

from verl_ext.axes import StepResults, TaskPool, build_selector, make_config
from verl_ext.axes.progress import bound_to_simplex

# 10 prompts: bucket 0 holds 6 (indices 100..105), bucket 1 holds 3 (106..108), bucket 7 holds 1 (109)
BUCKETS = [0, 0, 0, 0, 0, 0, 1, 1, 1, 7]
POOL = TaskPool(np.arange(100, 110), {"bucket": np.array(BUCKETS, dtype=float)})


def results(rewards: dict[int, list[float]], valid: dict[int, list[bool]] | None = None) -> StepResults:
    task = [t for t, rs in rewards.items() for _ in rs]
    out = StepResults.from_rewards(task, [r for rs in rewards.values() for r in rs])
    if valid is not None:
        out = StepResults(out.task_index, out.reward, out.success, np.array([v for vs in valid.values() for v in vs]))
    return out


def test_bounds_move_the_excess_to_the_free_entries_until_none_is_violated():
    np.testing.assert_allclose(bound_to_simplex(np.array([0.7, 0.2, 0.1]), np.zeros(3), np.full(3, 0.5)),
                               [0.5, 0.2 / 0.3 * 0.5, 0.1 / 0.3 * 0.5])
    # two rounds: 0.6 capped at 0.4, then 0.35 rescaled to 0.525 capped too, the last takes 0.2
    np.testing.assert_allclose(bound_to_simplex(np.array([0.6, 0.35, 0.05]), np.zeros(3), np.full(3, 0.4)),
                               [0.4, 0.4, 0.2])
    # lower bounds (density ratio): 0.02 raised to 0.1, the others give up the difference in proportion
    np.testing.assert_allclose(bound_to_simplex(np.array([0.49, 0.49, 0.02]), np.array([0, 0, 0.1]), np.ones(3)),
                               [0.45, 0.45, 0.1])
    with pytest.raises(ValueError, match="no distribution"):
        bound_to_simplex(np.array([0.5, 0.5]), np.zeros(2), np.full(2, 0.4))


def test_a_lower_and_an_upper_bound_binding_together_still_give_a_distribution_within_the_bounds():
    # one pass of the old rule set 0.9 to 0.375 and the rest to 0.125: total 0.75
    got = bound_to_simplex(np.array([0.9, 0.04, 0.03, 0.03]), np.full(4, 0.125), np.full(4, 0.375))
    np.testing.assert_allclose(got, [0.375, 0.25, 0.1875, 0.1875], rtol=1e-12)  # free ones: 6.25 x p
    # a reported case: density_ratio with epsilon 0, tau 0.05 (the old rule summed to 0.9 here)
    sel = build_selector({"name": "progress", "prior": "data", "epsilon": 0.0, "temperature": 0.05, "cap": None,
                          "ratio_clip": [0.5, 1.5]}, POOL, 0)
    sel.update(1, results({100: [1, 1, 1, 1], 106: [1, 1, 1, 0.1], 109: [1, 0, 1, 0]}))
    p = sel.distribution()
    assert abs(p.sum() - 1) <= 1e-12
    np.testing.assert_allclose(p / sel.p_data, [0.4 / 0.6, 1.5, 1.5], rtol=1e-12)


def test_zero_entries_take_mass_only_when_the_others_are_all_at_their_upper_bounds():
    np.testing.assert_array_equal(bound_to_simplex(np.array([0.5, 0.5, 0.0]), np.zeros(3), np.ones(3)),
                                  [0.5, 0.5, 0.0])
    # the limit of a vanishing equal weight on the zeros: 0.5 left, split evenly, 0.2 capped
    np.testing.assert_allclose(bound_to_simplex(np.array([1.0, 0.0, 0.0]), np.zeros(3), np.array([0.5, 1, 0.2])),
                               [0.5, 0.3, 0.2], rtol=1e-12)
    with pytest.raises(ValueError, match="p must"):
        bound_to_simplex(np.array([0.5, np.nan]), np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="lower <= upper"):
        bound_to_simplex(np.array([0.5, 0.5]), np.array([0.6, 0]), np.array([0.4, 1]))


def kl_projection_by_enumeration(p: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Every split of the entries into at-lower / at-upper / free (free ones in proportion to ``p``, taking the
    rest of the mass): the split within the bounds of least KL(q || p)."""
    best, best_kl = None, np.inf
    for sides in itertools.product((0, 1, 2), repeat=len(p)):
        side = np.array(sides)
        q, free = np.where(side == 0, lower, upper), side == 2
        if free.any():
            q[free] = p[free] * (1 - q[~free].sum()) / p[free].sum()
        if abs(q.sum() - 1) < 1e-9 and np.all(q >= lower - 1e-12) and np.all(q <= upper + 1e-12):
            kl = rel_entr(q, p).sum()
            best, best_kl = (q, kl) if kl < best_kl else (best, best_kl)
    return best


@st.composite
def box_and_distribution(draw, min_p: float):
    k = draw(st.integers(2, 6))
    unit = st.floats(0, 1)
    p = np.array(draw(st.lists(st.floats(min_p, 1), min_size=k, max_size=k)))
    p = p / p.sum() if p.sum() > 0 else np.full(k, 1 / k)
    witness = np.array(draw(st.lists(st.floats(0.01, 1), min_size=k, max_size=k)))
    witness /= witness.sum()  # a point of the box, so the box is feasible
    shrink, grow = np.array(draw(st.lists(unit, min_size=k, max_size=k))), draw(st.lists(unit, min_size=k, max_size=k))
    return p, witness * shrink, witness + (1 - witness) * np.array(grow)


@settings(max_examples=150, deadline=None)
@given(box_and_distribution(min_p=1e-3))
def test_bounded_distribution_is_the_kl_projection_of_p_onto_the_box(case):
    p, lower, upper = case
    got = bound_to_simplex(p, lower, upper)
    assert abs(got.sum() - 1) <= 1e-12 and np.all(got >= lower) and np.all(got <= upper)
    np.testing.assert_allclose(got, kl_projection_by_enumeration(p, lower, upper), atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(box_and_distribution(min_p=0.0))
def test_bounded_distribution_sums_to_one_within_any_feasible_box_zeros_in_p_included(case):
    p, lower, upper = case
    got = bound_to_simplex(p, lower, upper)
    assert abs(got.sum() - 1) <= 1e-12 and np.all(got >= lower) and np.all(got <= upper)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 5).flatmap(lambda k: st.tuples(*[st.tuples(st.integers(0, 10), st.integers(0, 10))] * k)))
def test_bounds_are_refused_exactly_when_the_lp_finds_no_distribution_within_them(pairs):
    lower = np.array([min(a, b) for a, b in pairs]) / 20
    upper = np.array([max(a, b) for a, b in pairs]) / 20
    k = len(pairs)
    feasible = linprog(np.zeros(k), A_eq=np.ones((1, k)), b_eq=[1.0], bounds=list(zip(lower, upper))).status == 0
    if feasible:
        assert abs(bound_to_simplex(np.full(k, 1 / k), lower, upper).sum() - 1) <= 1e-12
    else:
        with pytest.raises(ValueError, match="no distribution"):
            bound_to_simplex(np.full(k, 1 / k), lower, upper)


def test_bucket_uniform_progress_informativeness_and_distribution_by_hand():
    sel = build_selector({"name": "progress", "prior": "uniform", "epsilon": 0.2, "temperature": 0.2,
                          "cap": 0.5}, POOL, 0)
    np.testing.assert_allclose(sel.distribution(), [1 / 3] * 3)  # nothing seen: the prior
    # step 1: bucket 0 (prompts 100, 101), bucket 1 (prompt 106); bucket 7 unseen
    sel.update(1, results({100: [1, 0.1, 0.1, 1], 101: [0, 0, 0, 0], 106: [1, 1, 1, 0.1]}))
    p0, p1 = np.mean([1, 0.1, 0.1, 1, 0, 0, 0, 0]), np.mean([1, 1, 1, 0.1])
    np.testing.assert_allclose(sel.short[:2], [p0, p1]) and np.testing.assert_allclose(sel.long[:2], [p0, p1])
    i0 = (np.var([1, 0.1, 0.1, 1]) + 0.0) / 2  # mean population variance over the bucket's prompts
    i1 = np.var([1, 1, 1, 0.1])
    np.testing.assert_allclose(sel.informativeness, [i0, i1, 0])
    u = 0.5 * np.array([i0, i1])  # LP = 0 at the first observation
    soft = np.exp(u / 0.2) / np.exp(u / 0.2).sum()
    seen_mass = 2 / 3  # bucket 7 keeps its prior 1/3
    expected = np.append(seen_mass * (0.8 * soft + 0.2 * np.array([1 / 3, 1 / 3]) / seen_mass), 1 / 3)
    np.testing.assert_allclose(sel.distribution(), expected)
    # step 2: bucket 0 improves, bucket 1 drops: EMAs and LP = max(0, short - long)
    sel.update(2, results({102: [1, 1, 1, 1], 107: [0, 0, 0, 0]}))
    np.testing.assert_allclose(sel.short[:2], [0.7 * p0 + 0.3 * 1, 0.7 * p1])
    np.testing.assert_allclose(sel.long[:2], [0.97 * p0 + 0.03 * 1, 0.97 * p1])
    lp = np.maximum(0, sel.short - sel.long)
    assert lp[0] == pytest.approx(0.27 * (1 - p0)) and lp[1] == 0
    np.testing.assert_allclose(sel.informativeness, [0, 0, 0])  # both groups degenerate this step
    np.testing.assert_allclose(sel.utility(), 0.5 * lp)
    assert sel.metrics()["degenerate_rate"] == 1.0 and sel.metrics()["learning_progress/0"] == pytest.approx(lp[0])


def test_caps_and_density_ratio_hold_and_the_empirical_prior_is_the_data_frequency():
    hot = results({100: [1, 0, 1, 0], 106: [1, 1, 1, 1], 109: [1, 1, 1, 1]})  # bucket 0 informative
    with pytest.raises(ValueError, match="no distribution over 3 buckets"):  # 3 buckets x 0.25 < 1
        build_selector({"name": "progress", "prior": "data", "cap": 0.25}, POOL, 0)
    capped = build_selector({"name": "progress", "prior": "data", "epsilon": 0.5, "temperature": 0.2, "cap": 0.4},
                            POOL, 0)
    capped.update(1, hot)
    np.testing.assert_allclose(capped.prior, [0.6, 0.3, 0.1])  # the data's bucket frequencies
    p = capped.distribution()
    assert p.max() <= 0.4 + 1e-12 and p.sum() == pytest.approx(1) and p[0] == pytest.approx(0.4)
    ratio = build_selector({"name": "progress", "prior": "data", "epsilon": 0.5, "temperature": 0.2,
                            "cap": None, "ratio_clip": [0.5, 1.5]}, POOL, 0)
    ratio.update(1, hot)
    p = ratio.distribution()
    assert np.all(p / ratio.p_data <= 1.5 + 1e-9) and np.all(p / ratio.p_data >= 0.5 - 1e-9)
    u = np.array([0.5 * 0.25, 0, 0])  # only bucket 0's prompt has reward variance (0.25)
    q = 0.5 * np.exp(u / 0.2) / np.exp(u / 0.2).sum() + 0.5 * np.array([0.6, 0.3, 0.1])
    assert q[2] / 0.1 > 1.5  # the mixture lifts the rare bucket past 1.5 x its data share: held at the bound
    np.testing.assert_allclose(p, [0.85 * q[0] / q[:2].sum(), 0.85 * q[1] / q[:2].sum(), 0.15])


def test_selection_draws_distinct_prompts_with_bucket_frequencies_following_the_distribution():
    sel = build_selector({"name": "progress", "cap": None}, POOL, 3)
    sel.update(1, results({100: [1, 0, 1, 0], 106: [1, 1, 1, 1], 109: [0, 0, 0, 0]}))
    p = sel.distribution()
    counts = np.zeros(3)
    for step in range(2, 2002):
        tasks = sel.select(step, 1)
        counts[[0, 1, 2][[0, 1, 7].index(BUCKETS[int(tasks[0]) - 100])]] += 1
    np.testing.assert_allclose(counts / counts.sum(), p, atol=0.03)
    batch = sel.select(9999, 8)
    assert len(set(batch.tolist())) == 8 and set(batch.tolist()) <= set(POOL.index.tolist())
    assert sorted(sel.select(10000, 10).tolist()) == list(range(100, 110))  # overflow re-drawn elsewhere


def test_a_group_of_equal_non_zero_rewards_is_degenerate_for_both_selectors():
    """Eight rewards of 0.1 (formatted but wrong): degenerate, with no informativeness; 0.1 and 1.0: mixed."""
    step = results({100: [0.1] * 8, 106: [0.1] * 4 + [1.0] * 4})
    bucket = build_selector({"name": "progress"}, POOL, 0)
    bucket.update(1, step)
    assert bucket.metrics()["degenerate_rate"] == 0.5 and bucket.informativeness[0] == 0.0
    assert bucket.informativeness[1] == pytest.approx(np.var([0.1] * 4 + [1.0] * 4))
    prompt = build_selector({"name": "prompt_utility"}, POOL, 0)
    prompt.update(1, step)
    assert prompt.degenerate[[0, 6]].tolist() == [1, 0] and prompt.metrics()["degenerate_rate"] == 0.5
    assert prompt.variance[0] == 0.0 and prompt.utility()[0] == -1.0  # no progress or variance yet, all degenerate


def test_random_buckets_partition_the_prompts_by_seed_only():
    pool = TaskPool(np.arange(200), {})  # no bucket column needed
    a = build_selector({"name": "progress", "prior": "data", "random_buckets": 16, "cap": 0.25}, pool, 5)
    b = build_selector({"name": "progress", "prior": "data", "random_buckets": 16, "cap": 0.25}, pool, 5)
    c = build_selector({"name": "progress", "prior": "data", "random_buckets": 16, "cap": 0.25}, pool, 6)
    assert np.array_equal(a.bucket_of, b.bucket_of) and not np.array_equal(a.bucket_of, c.bucket_of)
    assert len(a.bucket_ids) == 16 and a.p_data.sum() == pytest.approx(1)
    with pytest.raises(ValueError, match="extra_info.bucket"):
        build_selector({"name": "progress"}, pool, 0)


def test_prompt_utility_by_hand_with_format_flags():
    sel = build_selector({"name": "prompt_utility"}, POOL, 0)
    first = sel.select(1, 4)
    assert len(set(first.tolist())) == 4 and sel.times.sum() == 4
    sel.update(1, results({100: [1, 0, 1, 0], 101: [0, 0, 0, 0]},
                          valid={100: [True, True, True, False], 101: [False] * 4}))
    u = sel.utility()
    over = np.maximum(0, sel.times / (4 / 10) - 1)
    assert u[0] == pytest.approx(0 + 0.25 - 0 - 0.25 - over[0])  # var 0.25, 1 of 4 rollouts invalid
    assert u[1] == pytest.approx(0 + 0 - 1 - 1 - over[1])  # degenerate, all invalid
    p = sel.distribution()
    assert p[2:] == pytest.approx([0.1] * 8)  # unseen prompts keep their prior
    soft = np.exp(u[:2] / 0.2) / np.exp(u[:2] / 0.2).sum()
    np.testing.assert_allclose(p[:2], 0.2 * (0.5 * soft + 0.5 * 0.5))
    # without flags, a verifier score of 0 counts as an invalid format (no usable answer)
    plain = build_selector({"name": "prompt_utility"}, POOL, 0)
    plain.update(1, results({100: [1, 0.1, 0, 0.1]}))
    assert plain.valid[0] == 3 and plain.metrics()["format_valid_rate"] == 0.75


@pytest.mark.parametrize("cfg", [{"name": "progress"}, {"name": "progress", "random_buckets": 4, "prior": "data"},
                                 {"name": "prompt_utility"}], ids=["buckets", "random_buckets", "prompt_utility"])
def test_exact_resume(cfg):
    a = build_selector(cfg, POOL, 1)
    for step in (1, 2):
        tasks = a.select(step, 3)
        a.update(step, results({int(t): [float(t % 2), 0.1, 1.0, 0.0] for t in tasks}))
    b = build_selector(cfg, POOL, 1)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    for step in (3, 4, 5):
        ta, tb = a.select(step, 3), b.select(step, 3)
        assert ta.tolist() == tb.tolist()
        r = results({int(t): [1.0, 0.0, 0.1, float(step % 2)] for t in ta})
        a.update(step, r), b.update(step, r)


def test_presets_spell_out_the_spec_table():
    from hydra import compose, initialize_config_dir

    import verl_ext

    want = {"bucket_uniform": ("uniform", 0.2, 0.2, 0.5, None, 0), "empirical": ("data", 0.5, 0.2, 0.25, None, 0),
            "conservative": ("data", 0.8, 0.5, 0.18, None, 0), "density_ratio": ("data", 0.5, 0.2, None, [0.5, 1.5], 0),
            "random_buckets": ("data", 0.5, 0.2, 0.25, None, 16)}
    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config" / "selector"), version_base=None):
        for preset, values in want.items():
            c = make_config("selector", compose(preset))
            got = (c.prior, c.epsilon, c.temperature, c.cap, None if c.ratio_clip is None else list(c.ratio_clip),
                   c.random_buckets)
            assert got == values, preset
            assert (c.alpha_short, c.alpha_long, c.progress_weight) == (0.3, 0.03, 0.5)
        assert make_config("selector", compose("prompt_utility")).epsilon == 0.5
    for bad in ({"prior": "flat"}, {"cap": 0.0}, {"ratio_clip": [1.2, 1.5]}, {"temperature": 0}):
        with pytest.raises(ValueError, match="selector=progress"):
            make_config("selector", {"name": "progress", **bad})
