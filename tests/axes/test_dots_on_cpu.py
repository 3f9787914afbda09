"""DOTS selector (verl_ext/axes/dots.py): attention prediction, targeting, reference set, resume, errors."""

import copy
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from verl_ext.axes import build_selector, make_config
from verl_ext.axes.dots import DotsSelector, DotsSelectorConfig, attention_predict
from verl_ext.axes.views import StepResults, TaskPool


def pool_with(embedding, index=None):
    embedding = np.asarray(embedding, dtype=np.float64)
    index = np.arange(len(embedding)) if index is None else np.asarray(index)
    column = np.empty(len(embedding), dtype=object)
    column[:] = [list(row) for row in embedding]  # a list column, as extra_info arrives
    return TaskPool(index, {"embedding": column})


def results_for(tasks, pass_rate, n=4):
    """n rollouts per task with round(pass_rate * n) successes."""
    task_index, reward = [], []
    for t, p in zip(tasks, pass_rate):
        s = int(round(p * n))
        task_index += [t] * n
        reward += [1.0] * s + [0.0] * (n - s)
    return StepResults.from_rewards(task_index, reward)


def test_attention_prediction_matches_hand_computation():
    # two reference prompts along the axes, difficulties 0.2 and 0.8; dot similarity, temperature 0.5
    pool = pool_with([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
    sel = DotsSelector(DotsSelectorConfig(similarity="dot", attention_temperature=0.5, reference_size=2), pool, 0)
    sel.key_positions, sel.key_difficulty = np.array([0, 1]), np.array([0.2, 0.8])
    d = sel.predict()
    w = np.exp(1 / 0.5) / (np.exp(1 / 0.5) + np.exp(0.0))  # query [1, 0]: logits 2, 0
    assert d[0] == pytest.approx(w * 0.2 + (1 - w) * 0.8)
    assert d[2] == pytest.approx(0.5)  # equidistant: plain mean
    w4 = np.exp(4.0) / (np.exp(4.0) + 1.0)  # query [2, 0]: logits 4, 0
    assert d[3] == pytest.approx(w4 * 0.2 + (1 - w4) * 0.8)
    # cosine: [2, 0] is normalised, so it predicts exactly like [1, 0]
    cos = DotsSelector(DotsSelectorConfig(attention_temperature=0.5, reference_size=2), pool, 0)
    cos.key_positions, cos.key_difficulty = sel.key_positions, sel.key_difficulty
    c = cos.predict()
    assert c[3] == pytest.approx(c[0]) == pytest.approx(d[0])
    assert c[2] == pytest.approx(0.5)  # [1, 1] vs the axes: cosine 1/sqrt(2) each -> plain mean
    assert attention_predict(np.ones((1, 2)), np.eye(2), np.array([0.0, 1.0]), 1.0)[0] == pytest.approx(0.5)


def test_linear_recalibration_is_least_squares_on_the_reference_set():
    """After an update the predictions are ``a d̂ + c`` with the line scikit-learn fits on the reference prompts'
    own attention predictions (each attends to the whole reference set, itself included)."""
    from sklearn.linear_model import LinearRegression

    pool, truth = clustered_pool()
    sel = build_selector({"name": "dots", "reference_size": 12, "attention_temperature": 0.5}, pool, 3)
    raw = build_selector({"name": "dots", "reference_size": 12, "attention_temperature": 0.5, "calibrate": False},
                         pool, 3)
    for s in (sel, raw):
        tasks = s.select(1, 20)
        s.update(1, results_for(tasks, truth[pool.positions(tasks)]))
    keys = raw.key_positions
    fit = LinearRegression().fit(raw.predict(keys)[:, None], raw.key_difficulty)
    assert sel.line == pytest.approx([fit.coef_[0], fit.intercept_])
    np.testing.assert_allclose(sel.predict(), fit.predict(raw.predict()[:, None]))
    assert sel.metrics()["calibration_slope"] == pytest.approx(fit.coef_[0])
    flat = build_selector({"name": "dots", "reference_size": 2}, pool_with(np.ones((5, 2))), 0)
    flat.select(1, 3)
    flat.update(1, results_for(pool_with(np.ones((5, 2))).index[flat.reference], [0.0, 1.0]))
    assert flat.line.tolist() == [0.0, 0.5]  # one distinct prediction: flat at the mean


def clustered_pool(groups=4, per_group=25, dim=8, seed=0):
    """groups of prompts around orthogonal directions; group g has true pass rate g / (groups - 1)."""
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[:groups] * 5.0
    emb = np.concatenate([centres[g] + rng.normal(scale=0.3, size=(per_group, dim)) for g in range(groups)])
    truth = np.repeat(np.linspace(0.0, 1.0, groups), per_group)  # pass rates 0, 1/3, 2/3, 1
    return pool_with(emb), truth


def test_selection_targets_difficulty_half_and_reference_is_measured_and_redrawn():
    # five groups with pass rates 0, 0.25, 0.5, 0.75, 1: only group 2 has d = 1 - pass rate = 0.5
    pool, _ = clustered_pool(groups=5, per_group=30)
    truth = np.repeat([0.0, 0.25, 0.5, 0.75, 1.0], 30)
    sel = build_selector({"name": "dots", "reference_size": 20, "temperature": 0.0}, pool, 3)
    batch, refs = 40, []
    for step in range(4):
        chosen = sel.select(step, batch)
        assert len(chosen) == batch == len(np.unique(chosen))
        reference, targeted = chosen[:20], chosen[20:]
        assert np.array_equal(np.sort(sel.pool.index[sel.reference]), np.sort(reference))
        refs.append(set(reference.tolist()))
        if step == 0:
            assert "predicted_difficulty_targeted_mean" not in sel.metrics()  # nothing measured: uniform
        else:
            assert np.all(truth[targeted] == 0.5)  # the 20 closest to d = 0.5 are the pass-rate-0.5 group
            assert sel.metrics()["predicted_difficulty_targeted_mean"] == pytest.approx(0.5, abs=0.05)
        sel.update(step, results_for(chosen, truth[chosen]))
        # the keys are exactly this step's reference set with d = 1 - pass rate
        assert set(sel.pool.index[sel.key_positions].tolist()) == refs[-1]
        assert np.allclose(sel.key_difficulty, 1.0 - truth[sel.key_positions])
        assert sel.metrics()["reference_measured"] == 20.0
        if step > 0:
            assert sel.metrics()["prediction_abs_error"] < 0.05
    assert len(set.union(*refs)) > 20  # re-drawn each step


def test_attend_to_batch_uses_every_measured_prompt_and_sampling_mode():
    pool, truth = clustered_pool()
    sel = build_selector({"name": "dots", "reference_size": 5, "attend_to": "batch"}, pool, 1)
    chosen = sel.select(0, 12)
    sel.update(0, results_for(chosen, truth[chosen]))
    assert sorted(sel.pool.index[sel.key_positions].tolist()) == sorted(chosen.tolist())
    # softmax sampling (temperature 0.1) prefers moderate prompts but is random: compare with a huge temperature
    hits = {0.1: 0, 1e6: 0}
    for temperature in hits:
        s = build_selector({"name": "dots", "reference_size": 10, "temperature": temperature}, pool, 2)
        for step in range(30):
            chosen = s.select(step, 30)
            hits[temperature] += int(np.sum(np.abs(truth[chosen[10:]] - 0.5) < 0.2))
            s.update(step, results_for(chosen, truth[chosen], n=6))
    assert hits[0.1] > 1.5 * hits[1e6]


def test_exact_resume():
    pool, truth = clustered_pool()
    cfg = {"name": "dots", "reference_size": 6}
    a = build_selector(cfg, pool, 7)
    for step in range(3):
        chosen = a.select(step, 16)
        a.update(step, results_for(chosen, truth[chosen]))
    b = build_selector(cfg, pool, 123)  # different seed: everything comes from the state
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    for step in range(3, 6):
        ca, cb = a.select(step, 16), b.select(step, 16)
        assert ca.tolist() == cb.tolist()
        a.update(step, results_for(ca, truth[ca]))
        b.update(step, results_for(cb, truth[cb]))
        assert a.metrics() == b.metrics()
    other = pool_with(np.ones((len(pool), 8)), index=np.arange(len(pool)) + 1)
    with pytest.raises(ValueError, match="task pool differs"):
        build_selector(cfg, other, 0).load_state_dict(a.state_dict())


def test_missing_or_bad_embeddings_error_clearly(tmp_path):
    pool = TaskPool(np.arange(4), {"cluster_id": np.zeros(4)})
    with pytest.raises(ValueError, match=r"extra_info\.embedding, which the training data lacks"):
        build_selector({"name": "dots"}, pool, 0)
    with pytest.raises(ValueError, match=r"extra_info\.vec"):
        build_selector({"name": "dots", "embedding_column": "vec"}, pool, 0)
    with pytest.raises(ValueError, match="cannot read embedding_file '.*nope.npy'"):
        build_selector({"name": "dots", "embedding_file": str(tmp_path / "nope.npy")}, pool, 0)
    short = tmp_path / "short.npy"
    np.save(short, np.ones((3, 2)))
    with pytest.raises(ValueError, match="has 3 rows but .*index up to 3"):
        build_selector({"name": "dots", "embedding_file": str(short)}, pool, 0)
    with pytest.raises(ValueError, match="not finite"):
        build_selector({"name": "dots"}, pool_with([[1.0, np.nan], [1.0, 0.0]]), 0)
    with pytest.raises(ValueError, match="zero vectors"):
        build_selector({"name": "dots"}, pool_with([[0.0, 0.0], [1.0, 0.0]]), 0)
    with pytest.raises(ValueError, match="one length"):
        col = np.empty(2, dtype=object)
        col[:] = [[1.0, 0.0], [1.0]]
        build_selector({"name": "dots"}, TaskPool(np.arange(2), {"embedding": col}), 0)


def test_embedding_file_rows_follow_extra_info_index(tmp_path):
    table = np.zeros((10, 2))
    table[7], table[3], table[9] = [1.0, 0.0], [0.0, 1.0], [1.0, 0.1]
    path = tmp_path / "emb.npy"
    np.save(path, table)
    pool = TaskPool(np.array([9, 3, 7]))  # dataset order differs from index order
    sel = build_selector({"name": "dots", "embedding_file": str(path), "reference_size": 1}, pool, 0)
    assert np.allclose(sel.embedding[2], [1.0, 0.0]) and np.allclose(sel.embedding[1], [0.0, 1.0])


def test_batch_and_config_validation():
    pool, _ = clustered_pool()
    sel = build_selector({"name": "dots", "reference_size": 8}, pool, 0)
    with pytest.raises(ValueError, match="must be smaller than the batch"):
        sel.select(0, 8)
    with pytest.raises(ValueError, match="pool of 100"):
        sel.select(0, 101)
    for bad in ({"similarity": "l2"}, {"attend_to": "all"}, {"attention_temperature": 0.0}, {"target": 1.5},
                {"reference_size": 0}, {"temperature": -1.0}):
        with pytest.raises(ValueError, match="selector=dots"):
            make_config("selector", {"name": "dots", **bad})


def test_yaml_preset_spells_out_the_defaults():
    from hydra import compose, initialize_config_dir

    import verl_ext

    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config" / "selector"), version_base=None):
        composed = compose("dots")
        made = make_config("selector", composed)
    assert made == DotsSelectorConfig()
    assert set(composed) == {f.name for f in fields(DotsSelectorConfig)}  # every key spelled out
    assert replace(made, reference_size=256).reference_size == 256


# ---------------------------------------------------------------- the authors' trained predictor (predictor=adapter)
def reference_adapter(model, query, ref, ref_pass):
    """The authors' rule (teacher_utils.py: build_projection, RegressionHead, ResidualHead group_logit_temp),
    re-derived in NumPy from the model's weights, dropout off."""
    from scipy.special import erf, expit, logit

    w = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}

    def norm(x, name):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def proj(x, prefix):  # LayerNorm(0), Linear(1), GELU, Dropout, Linear(4), LayerNorm(5)
        x = norm(x, f"{prefix}.0")
        x = x @ w[f"{prefix}.1.weight"].T + w[f"{prefix}.1.bias"]
        x = 0.5 * x * (1 + erf(x / np.sqrt(2)))
        x = x @ w[f"{prefix}.4.weight"].T + w[f"{prefix}.4.bias"]
        return norm(x, f"{prefix}.5")

    q, r = proj(query, "query_proj"), proj(ref, "ref_proj")
    scores = q @ r.T / np.sqrt(r.shape[1])
    a = np.exp(scores - scores.max(1, keepdims=True))
    base = (a / a.sum(1, keepdims=True)) @ ref_pass
    stats = np.array([ref_pass.mean(), ref_pass.std(ddof=1)])
    h = np.maximum(stats @ w["head.0.weight"].T + w["head.0.bias"], 0) @ w["head.2.weight"].T + w["head.2.bias"]
    temp = np.clip(np.log1p(np.exp(h[0])), 1e-2, 10)
    return expit(logit(np.clip(base, 1e-4, 1 - 1e-4)) / temp + np.tanh(h[1]))


def tiny_adapter(input_size=3, seed=0):
    import torch

    from verl_ext.axes.dots_predictor import AdapterShape, DifficultyAdapter

    torch.manual_seed(seed)
    model = DifficultyAdapter(AdapterShape(input_size, hidden_size=5, num_layers=2))
    with torch.no_grad():  # LayerNorm affines away from 1 / 0, so the reference checks them too
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model.eval()


def test_adapter_matches_the_authors_rule_computed_by_hand():
    from verl_ext.axes.dots_predictor import predict_pass_rate

    rng = np.random.default_rng(0)
    model = tiny_adapter()
    query, ref, ref_pass = rng.normal(size=(7, 3)), rng.normal(size=(4, 3)), np.array([0.0, 0.25, 0.875, 1.0])
    got = predict_pass_rate(model, query, ref, ref_pass, chunk=3)  # chunks of 3, 3, 1
    np.testing.assert_allclose(got, reference_adapter(model, query, ref, ref_pass), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=">= 2 reference"):
        predict_pass_rate(model, query, ref[:1], ref_pass[:1])


def test_adapter_training_learns_pass_rates_of_unseen_prompts():
    """Two policies whose pass rates follow the first embedding coordinate (one shifted): after the authors' training
    loop the predictions of held-out prompts, from a policy's own reference pass rates, track that policy (the
    untrained model: negative correlation, mean error about 0.3)."""
    import torch
    from scipy.special import expit

    from verl_ext.axes.dots_predictor import AdapterShape, predict_pass_rate, train_adapter

    rng = np.random.default_rng(1)
    emb = rng.normal(size=(160, 4))
    table = np.stack([expit(2.5 * emb[:, 0]), expit(2.5 * emb[:, 0] - 1.5)])
    rows = rng.permutation(160)
    query_rows, ref_rows, held_out = rows[:96], rows[96:128], rows[128:]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only contend
    try:
        model = train_adapter(emb, table, query_rows, ref_rows, AdapterShape(4, hidden_size=16, num_layers=2),
                              ref_size=16, batch_size=32, epochs=20, lr=1e-2, seed=1)
    finally:
        torch.set_num_threads(threads)
    pred = [predict_pass_rate(model, emb[held_out], emb[ref_rows], table[p, ref_rows]) for p in range(2)]
    for policy in range(2):
        assert np.corrcoef(pred[policy], table[policy, held_out])[0, 1] > 0.75
        assert np.mean(np.abs(pred[policy] - table[policy, held_out])) < 0.2
    assert np.all(pred[1] < pred[0])  # the weaker policy's reference pass rates lower every prediction
    with pytest.raises(ValueError, match="disjoint"):
        train_adapter(emb, table, query_rows, query_rows[:20], ref_size=16)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        train_adapter(emb, table * 2, query_rows, ref_rows, ref_size=16)


def test_selector_with_the_adapter_predicts_one_minus_its_pass_rate_then_recalibrates(tmp_path):
    from verl_ext.axes.dots_predictor import predict_pass_rate, save_adapter

    model, path = tiny_adapter(input_size=3, seed=2), tmp_path / "adapter.pt"
    save_adapter(model, str(path))
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(30, 3)) * 4.0  # raw: the adapter's LayerNorm sees them unnormalised
    pool = pool_with(emb)
    cfg = {"name": "dots", "predictor": "adapter", "predictor_file": str(path), "reference_size": 6,
           "calibrate": False}
    sel = build_selector(cfg, pool, 0)
    chosen = sel.select(1, 12)
    sel.update(1, results_for(chosen, [0.25, 0.5, 0.75, 1.0, 0.0, 0.5] + [0.5] * 6))
    keys = sel.key_positions
    expected = 1.0 - predict_pass_rate(model, emb, emb[keys], 1.0 - sel.key_difficulty)
    np.testing.assert_allclose(sel.predict(), expected, rtol=1e-6)
    calibrated = build_selector({**cfg, "calibrate": True}, pool, 0)
    calibrated.load_state_dict(sel.state_dict())
    calibrated._fit_line()
    a, c = np.polyfit(expected[keys], sel.key_difficulty, 1)
    np.testing.assert_allclose(calibrated.predict(), a * expected + c, rtol=1e-5, atol=1e-8)
    with pytest.raises(ValueError, match="takes 3-d embeddings, the data has 2-d"):
        build_selector(cfg, pool_with(np.ones((5, 2))), 0)
    with pytest.raises(ValueError, match="predictor_file"):
        make_config("selector", {"name": "dots", "predictor": "adapter"})
    with pytest.raises(ValueError, match="reference_size=1 must be >= 2"):
        make_config("selector", {**cfg, "reference_size": 1})
    with pytest.raises(ValueError, match="cannot load the predictor"):
        build_selector({**cfg, "predictor_file": str(tmp_path / "nope.pt")}, pool, 0)


# ---------------------------------------------------------------- protocol=measured (the authors' rounds)
def test_measured_protocol_serves_the_authors_round():
    """RT:813-925 by hand: a round measures its reference set only, predicts every prompt (attention, then the line
    fitted on the reference set), draws round_steps x per-step prompts nearest 0.5 from the whole pool and serves them
    over round_steps steps: batch_size per step in the first round, floor(fresh_fraction x batch_size) after it."""
    rng = np.random.default_rng(4)
    emb = rng.normal(size=(10, 3))
    pool = pool_with(emb)
    cfg = {"name": "dots", "protocol": "measured", "reference_size": 4, "round_steps": 2, "fresh_fraction": 0.5,
           "temperature": 0.0, "similarity": "dot", "attention_temperature": 1.0}
    sel = build_selector(cfg, pool, 0)
    with pytest.raises(RuntimeError, match="measure"):
        sel.select(1, 3)
    reference = sel.measurement(1)
    assert len(np.unique(reference)) == 4
    pass_rate = np.array([0.0, 0.25, 0.75, 1.0])
    sel.measure(1, results_for(reference, pass_rate))

    d_ref = 1.0 - pass_rate  # the authors' rule, written out
    logits = emb @ emb[reference].T
    w = np.exp(logits - logits.max(1, keepdims=True))
    raw = (w / w.sum(1, keepdims=True)) @ d_ref
    a, c = np.polyfit(raw[reference], d_ref, 1)
    nearest = np.argsort(np.abs(a * raw + c - 0.5))
    np.testing.assert_allclose(sel.predict(), a * raw + c, rtol=1e-9)

    first = sel.select(1, 3)
    assert sel.metrics()["calibration_slope"] == pytest.approx(a) and sel.metrics()["round_left"] == 3.0
    assert sel.measurement(2).size == 0  # mid-round: nothing to measure
    second = sel.select(2, 3)
    assert len(first) == len(second) == 3 and set(first) | set(second) == set(nearest[:6].tolist())
    keys = sel.key_positions.copy()
    sel.update(2, results_for(second, [1.0, 1.0, 1.0]))
    assert np.array_equal(sel.key_positions, keys) and "prediction_abs_error" in sel.metrics()  # training: no keys

    again = sel.measurement(3)  # the next round: a fresh reference set, sigma x batch per step
    sel.measure(3, results_for(again, [0.5, 0.5, 0.0, 1.0]))
    third = sel.select(3, 3)
    assert len(third) == 1 and sel.metrics()["round_selected"] == 2.0
    resumed = build_selector(cfg, pool, 99)
    resumed.load_state_dict(copy.deepcopy(sel.state_dict()))
    assert resumed.select(4, 3).tolist() == sel.select(4, 3).tolist()
    assert resumed.measurement(5).tolist() == sel.measurement(5).tolist() and len(sel.measurement(5)) == 4
    with pytest.raises(ValueError, match="outside this round's reference set"):
        sel.measure(5, results_for(np.setdiff1d(pool.index, sel.pool.index[sel.reference])[:1], [0.5]))
    with pytest.raises(RuntimeError, match="protocol=measured"):
        build_selector({"name": "dots", "reference_size": 2}, pool, 0).measure(1, results_for([0], [0.5]))
    assert build_selector({"name": "dots", "reference_size": 2}, pool, 0).measurement(1).size == 0
    with pytest.raises(ValueError, match="round_steps"):
        make_config("selector", {**cfg, "round_steps": 0})
