"""python -m data_prep.dots_predictor: a tiny pass-rate table of 3 policies whose pass rates follow the first embedding
coordinate; the written predictor loads into selector=dots (predictor=adapter) and beats the constant predictor on
held-out prompts; bad inputs fail naming the file, row and field."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit

from data_prep.dots_predictor import main
from data_prep.schema import make_row, write_rows

COLUMNS = ["pass_a", "pass_b", "pass_c"]
SHIFTS = (1.0, 0.0, -1.5)  # three policies, strongest first
TINY = ["--ref-size", "8", "--batch-size", "32", "--epochs", "20", "--lr", "1e-2", "--hidden-size", "16",
        "--num-layers", "2", "--ref-fraction", "0.25", "--held-out-fraction", "0.25"]


@pytest.fixture(autouse=True)
def one_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only contend
    yield
    torch.set_num_threads(threads)


def table(tmp_path, n=60, dim=6, *, holes=(), name="train.parquet"):
    """Rows with stable indices 3i + 1 (not positions), the embeddings table by index (NaN rows between); ``holes``:
    (policy, row) pairs not measured."""
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(n, dim))
    index = 3 * np.arange(n) + 1
    rates = np.stack([expit(2.5 * emb[:, 0] + s) for s in SHIFTS])
    for policy, row in holes:
        rates[policy, row] = np.nan
    rows = [make_row(data_source="arithmetic", question=f"q{i}", ability="math", ground_truth="1", index=int(k),
                     split="train", **{c: float(rates[p, i]) for p, c in enumerate(COLUMNS)})
            for i, k in enumerate(index)]
    write_rows(rows, tmp_path / name)
    full = np.full((index.max() + 1, dim), np.nan, dtype=np.float32)
    full[index] = emb
    np.save(tmp_path / "emb.npy", full)
    return tmp_path / name, tmp_path / "emb.npy", index, emb, rates


def test_cli_writes_a_predictor_that_selector_dots_uses_and_beats_a_constant(tmp_path):
    from verl_ext.axes.dots import DotsSelector, DotsSelectorConfig
    from verl_ext.axes.views import StepResults, TaskPool

    path, emb_file, index, emb, rates = table(tmp_path, holes=[(1, 9)])  # row 9 left out of training, no error
    out = tmp_path / "pred" / "dots_predictor.pt"
    assert main(["--input", str(path), "--out", str(out), "--pass-rate-columns", *COLUMNS,
                 "--embeddings", str(emb_file), *TINY]) == 0
    summary = json.loads((tmp_path / "pred" / "dots_predictor.json").read_text())
    assert summary["rows"] == 60 and summary["rows_left_out_partly_measured"] == 1 and summary["policies"] == COLUMNS
    assert summary["split"] == {"held_out": 15, "ref": 15, "query": 29}
    held = summary["held_out"]
    assert held["bce"] < held["constant_bce"] - 0.05 and held["mae"] < 0.75 * held["constant_mae"]

    config = DotsSelectorConfig(predictor="adapter", predictor_file=str(out), embedding_file=str(emb_file),
                                protocol="measured", reference_size=8, temperature=0.0)
    selector = DotsSelector(config, TaskPool(index[::-1].copy()), seed=0)  # dataset order != index order
    measured = selector.measurement(0)
    pos = (measured - 1) // 3
    n = 8  # rollouts per prompt, successes as the weakest policy's pass rate rounded
    success = np.concatenate([np.arange(n) < round(rates[2, i] * n) for i in pos])
    selector.measure(0, StepResults(np.repeat(measured, n), success.astype(float), success))
    d_hat = selector.predict()
    truth = 1.0 - rates[2, (selector.pool.index - 1) // 3]
    assert np.corrcoef(d_hat, truth)[0, 1] > 0.8  # the weakest policy's difficulty, from its own reference
    assert len(np.intersect1d(selector.select(0, 4), index)) == 4


def test_bad_input_fails_naming_file_row_and_field(tmp_path, capsys):
    path, emb_file, index, emb, rates = table(tmp_path)
    out = str(tmp_path / "p.pt")

    def error(*args: str) -> str:
        assert main(["--out", out, *TINY, *args]) == 2
        return capsys.readouterr().err

    err = error("--input", str(path), "--pass-rate-columns", "pass_a", "pass_z", "--embeddings", str(emb_file))
    assert "field 'extra_info.pass_z'" in err and "no row has a value in this pass-rate column" in err
    bad, _, _, _, _ = table(tmp_path, holes=[(0, 7), (1, 7), (2, 7), (1, 9)], name="holes.parquet")  # row 7: none
    err = error("--input", str(bad), "--pass-rate-columns", *COLUMNS, "--embeddings", str(emb_file))
    assert "holes.parquet, row 7" in err and "extra_info.index 22" in err and "no policy measured" in err
    short = np.load(emb_file)[:40]  # indices from 40 on have no row
    np.save(tmp_path / "short.npy", short)
    err = error("--input", str(path), "--pass-rate-columns", *COLUMNS, "--embeddings", str(tmp_path / "short.npy"))
    assert "train.parquet, row 13, field 'extra_info.index'" in err and "40 has no row" in err
    gap = np.load(emb_file)
    gap[index[5]] = np.nan
    np.save(tmp_path / "gap.npy", gap)
    err = error("--input", str(path), "--pass-rate-columns", *COLUMNS, "--embeddings", str(tmp_path / "gap.npy"))
    assert "row 5, field 'extra_info.index'" in err and "16: its row" in err and "not finite" in err
    err = error("--input", str(path), "--pass-rate-columns", *COLUMNS)
    assert "exactly one of --embeddings" in err
