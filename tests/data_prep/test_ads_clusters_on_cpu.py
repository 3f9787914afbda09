"""ADS offline preprocessing (``python -m data_prep.ads_clusters``): end to end with the embedded model cut to
2 layers and with MiniLM, the difficulty recomputed by hand, resume from the chunk cache, and bad input."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from data_prep import ads_clusters, embedded_datasets
from data_prep.ads import clustering, model_passes
from data_prep.ads.clustering import rank_in_clusters
from data_prep.ads.settings import Settings
from data_prep.ads.texts import load_samples, solution_of
from data_prep.ads_clusters import main
from data_prep.schema import DataError, read_rows, write_rows
from data_prep.sft_messages import worked_solution
from verl_ext.axes.ads import AdsSelectorConfig, cluster_orders
from verl_ext.axes.views import TaskPool
from verl_ext.models.embedded import embedded_model_path

TINY = "embedded:2"
N_ROWS, K, CHUNK = 24, 4, 8
NEW = ("cluster_id", "rank_in_cluster", "cluster_size", "difficulty")


def _run(inp, out, *extra):
    return main(["--input", str(inp), "--out", str(out), "--model", TINY, "--clusters", str(K),
                 "--chunk-size", str(CHUNK), "--batch-size", "4", *extra])


@pytest.fixture(scope="module")
def arithmetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return embedded_datasets.build("arithmetic", root, train_size=N_ROWS, test_size=2)["train"]


@pytest.fixture(scope="module")
def policy_run(arithmetic, tmp_path_factory):
    """One uninterrupted run: policy embeddings, worked solutions, K = 4, three cache chunks."""
    out = tmp_path_factory.mktemp("policy") / "train_ads.parquet"
    assert _run(arithmetic, out, "--solution-field", "worked") == 0
    summary = json.loads(out.with_suffix(".clusters.json").read_text())
    return out, summary


def _strip(rows, prefix=""):
    for row in rows:
        for c in NEW:
            row["extra_info"].pop(prefix + c)
    return rows


def _check_columns(rows, prefix=""):
    labels = np.array([r["extra_info"][prefix + "cluster_id"] for r in rows])
    ranks = np.array([r["extra_info"][prefix + "rank_in_cluster"] for r in rows])
    sizes = np.array([r["extra_info"][prefix + "cluster_size"] for r in rows])
    diff = np.array([r["extra_info"][prefix + "difficulty"] for r in rows])
    assert sorted(set(labels)) == list(range(K))
    for c in range(K):
        members = np.flatnonzero(labels == c)
        assert (sizes[members] == len(members)).all()
        assert sorted(ranks[members]) == list(range(len(members)))
        by_rank = members[np.argsort(ranks[members])]
        assert (np.diff(diff[by_rank]) >= 0).all(), "easiest first"
    return labels, diff


def test_policy_run_writes_columns_summary_and_plot(arithmetic, policy_run):
    out, summary = policy_run
    rows = read_rows(out)
    labels, diff = _check_columns(rows)
    assert _strip(rows) == read_rows(arithmetic), "same rows, same order, nothing else changed"
    assert summary["rows"] == N_ROWS and summary["clusters"] == K and summary["pca_dims"] == N_ROWS - 1  # min(128, rows - 1, 576)
    assert summary["n_init"] == 10 and summary["template"] == "Question:\n{question}\n\nAnswer:\n{solution}"
    assert [c["size"] for c in summary["per_cluster"]] == np.bincount(labels).tolist()
    for c in summary["per_cluster"]:
        assert c["mean_difficulty"] == pytest.approx(diff[labels == c["cluster_id"]].mean())
    assert summary["chunks"][f"causal_lm:{TINY}"]["computed"] == 3 and summary["dtype"] == "fp32"
    assert Path(summary["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_embeddings_file_is_the_clustered_space_by_index(policy_run):
    """``OUT_STEM.embeddings.npy`` (selector=dots's embedding_file): row ``extra_info.index`` = the row's PCA
    coordinates, in which every row is nearer its own K-Means centre than any other cluster's centre."""
    out, summary = policy_run
    rows = read_rows(out)
    table = np.load(summary["embeddings"])
    index = np.array([r["extra_info"]["index"] for r in rows])
    assert Path(summary["embeddings"]) == out.with_suffix(".embeddings.npy")
    assert table.shape == (index.max() + 1, N_ROWS - 1) and table.dtype == np.float32  # min(128, rows - 1, 576)
    absent = np.setdiff1d(np.arange(len(table)), index)
    assert np.isnan(table[absent]).all() and np.isfinite(table[index]).all()
    labels = np.array([r["extra_info"]["cluster_id"] for r in rows])
    space = table[index].astype(np.float64)
    centres = np.stack([space[labels == c].mean(0) for c in range(K)])
    nearest = np.argmin(((space[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    assert (nearest == labels).all()


def test_difficulty_and_embedding_match_a_hand_computation(arithmetic, policy_run):
    """Row 5 alone through the full causal LM: mean NLL of ``{solution}`` after ``Question:\\n...\\n\\nAnswer:\\n``,
    and the mean of the last hidden states over the whole sequence (the run batched and padded it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, summary = policy_run
    r = 5
    row = read_rows(arithmetic)[r]
    question = row["prompt"][-1]["content"].strip()
    path = embedded_model_path(num_layers=2)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prefix = tok(f"Question:\n{question}\n\nAnswer:\n", add_special_tokens=False)["input_ids"]
    answer = tok(worked_solution(row), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        res = model(torch.tensor([prefix + answer]), output_hidden_states=True)
    logp = torch.log_softmax(res.logits[0].double(), -1)
    nll = -np.mean([logp[len(prefix) + i - 1, t].item() for i, t in enumerate(answer)])
    assert read_rows(out)[r]["extra_info"]["difficulty"] == pytest.approx(nll, abs=1e-4)

    chunk = np.load(Path(summary["chunks"][f"causal_lm:{TINY}"]["cache"]) / f"chunk_{r // CHUNK:05d}.npz")
    np.testing.assert_allclose(chunk["embedding"][r % CHUNK], res.hidden_states[-1][0].mean(0).numpy(), atol=1e-4)
    assert chunk["solution_tokens"][r % CHUNK] == len(answer)


def test_interrupted_run_resumes_without_recomputing(arithmetic, policy_run, tmp_path, monkeypatch):
    rows_seen = []
    real = model_passes.forward_batch

    def counting(model, sequences, starts, pad_id):
        rows_seen.extend(sequences)
        return real(model, sequences, starts, pad_id)

    monkeypatch.setattr(model_passes, "forward_batch", counting)
    out = tmp_path / "train_ads.parquet"
    assert _run(arithmetic, out, "--solution-field", "worked", "--stop-after-chunks", "1") == 3
    assert not out.exists() and len(rows_seen) == CHUNK
    rows_seen.clear()
    assert _run(arithmetic, out, "--solution-field", "worked") == 0
    assert len(rows_seen) == N_ROWS - CHUNK, "the cached chunk is not recomputed"
    summary = json.loads(out.with_suffix(".clusters.json").read_text())
    assert summary["chunks"][f"causal_lm:{TINY}"] | {"cache": None} == {"computed": 2, "reused": 1, "cache": None}
    assert read_rows(out) == read_rows(policy_run[0]), "resumed = uninterrupted"

    out.unlink()  # a completed run again: nothing recomputed, same file
    rows_seen.clear()
    assert _run(arithmetic, out, "--solution-field", "worked") == 0
    summary = json.loads(out.with_suffix(".clusters.json").read_text())
    assert rows_seen == [] and summary["chunks"]["clustering"] == "reused"
    assert read_rows(out) == read_rows(policy_run[0])


def test_minilm_clusters_under_a_prefix_next_to_the_policy_ones(policy_run):
    """Cross-policy columns: MiniLM clusters written as ``minilm_*`` into the policy run's output; the difficulty
    comes from the same base policy on the same texts, so its cache is reused."""
    first, _ = policy_run
    out = first.parent / "train_ads_minilm.parquet"
    assert _run(first, out, "--solution-field", "worked", "--embedder", "minilm", "--prefix", "minilm_") == 0
    rows = read_rows(out)
    _, diff = _check_columns(rows, "minilm_")
    assert diff.tolist() == [r["extra_info"]["difficulty"] for r in rows]
    assert _strip(rows, "minilm_") == read_rows(first)
    summary = json.loads(out.with_suffix(".minilm_clusters.json").read_text())
    assert summary["embedder"] == "minilm" and summary["chunks"]["minilm"]["computed"] == 3
    assert summary["chunks"][f"causal_lm:{TINY}"]["computed"] == 0
    assert Path(summary["plot"]).name == "train_ads_minilm.minilm_clusters.png" and Path(summary["plot"]).is_file()


def test_cluster_follows_the_authors_pca_and_kmeans():
    """PCA to min(dims, rows - 1, features) by the randomized solver, K-Means n_init="auto", as the authors'
    src/cluster_embeddings.py; scikit-learn run on the same normalised input gives the same labels."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    x = np.random.default_rng(0).normal(size=(12, 20))
    found = clustering.cluster(x, 3, 128, 42, "auto")
    assert int(found["pca_dims"]) == 11 and found["space"].shape == (12, 11)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    z = PCA(n_components=11, random_state=42, svd_solver="randomized").fit_transform(unit)
    np.testing.assert_allclose(found["space"], z, atol=1e-5)
    _, expected = np.unique(KMeans(n_clusters=3, random_state=42, n_init="auto").fit(z).labels_, return_inverse=True)
    assert found["labels"].tolist() == expected.tolist()
    with pytest.raises(ValueError, match="at least 2 samples"):
        clustering.cluster(x[:1], 1, 128, 42, "auto")
    assert ads_clusters._n_init("auto") == "auto" and ads_clusters._n_init("3") == 3
    with pytest.raises(SystemExit):  # argparse refuses it before reading anything
        _run("x.parquet", "y.parquet", "--n-init", "0")


def test_rank_in_clusters_by_hand():
    labels = np.array([1, 0, 1, 1, 0])
    rank, size = rank_in_clusters(labels, np.array([0.5, 2.0, 0.1, 0.5, 1.0]))
    assert rank.tolist() == [1, 1, 0, 2, 0]  # cluster 1: row 2 (0.1), rows 0 and 3 tie at 0.5 -> row order
    assert size.tolist() == [3, 2, 3, 3, 2]


def _write(rows, path):
    pd.DataFrame(rows).to_parquet(path, index=False)  # not write_rows: it would refuse the bad rows
    return path


def test_bad_input_names_file_row_and_field(arithmetic, policy_run, tmp_path, capsys):
    rows = read_rows(arithmetic)
    with pytest.raises(DataError, match=r"train\.parquet, row 0, field 'extra_info\.solution': missing"):
        load_samples(Settings(str(arithmetic), "x.parquet"))  # arithmetic rows carry no solution field

    countdown = embedded_datasets.build("countdown", tmp_path / "cd", train_size=6, test_size=1)["train"]
    assert load_samples(Settings(str(countdown), "x.parquet", clusters=2))[2] == [
        r["extra_info"]["solution"] for r in read_rows(countdown)]
    bad = read_rows(countdown)
    bad[3]["extra_info"]["solution"] = "  "
    with pytest.raises(DataError, match=r"bad\.parquet, row 3, field 'extra_info\.solution': missing or empty"):
        load_samples(Settings(str(_write(bad, tmp_path / "bad.parquet")), "x.parquet", clusters=2))

    no_user = [dict(r) for r in rows]
    no_user[2] = {**rows[2], "prompt": [{"role": "system", "content": "You are helpful."}]}
    with pytest.raises(DataError, match=r"no_user\.parquet, row 2, field 'prompt': empty prompt"):
        load_samples(Settings(str(_write(no_user, tmp_path / "no_user.parquet")), "x.parquet", solution_field="worked"))
    blank = [dict(r) for r in rows]
    blank[4] = {**rows[4], "prompt": [{"role": "user", "content": " "}]}
    with pytest.raises(DataError, match=r"blank\.parquet, row 4, field 'prompt': empty prompt"):
        load_samples(Settings(str(_write(blank, tmp_path / "blank.parquet")), "x.parquet", solution_field="worked"))

    assert main(["--input", str(arithmetic), "--out", str(tmp_path / "o.parquet"), "--solution-field", "worked"]) == 2
    err = capsys.readouterr().err
    assert str(arithmetic) in err and f"{N_ROWS} samples, fewer than the 64 clusters" in err
    assert _run(policy_run[0], tmp_path / "again.parquet", "--solution-field", "worked") == 2
    assert "row 0, field 'extra_info.cluster_id': already present" in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / ".ads_cache").exists()


def test_tokenize_cuts_the_solution_then_the_prompt():
    """An over-long prompt (``max_length`` tokens or more) is cut and keeps no solution token, as the authors'
    src/compute_difficulty.py:120-127 (it stopped the run before)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_model_path(num_layers=2))
    prefix = tok("Question:\nWhat is 2 + 3?\n\nAnswer:\n", add_special_tokens=False)["input_ids"]
    answer = tok("2 + 3 = 5. The answer is 5.", add_special_tokens=False)["input_ids"]
    assert model_passes.tokenize(tok, "What is 2 + 3?", "2 + 3 = 5. The answer is 5.", 4096) == (prefix + answer, len(prefix), False)
    ids, start, cut = model_passes.tokenize(tok, "What is 2 + 3?", "2 + 3 = 5. The answer is 5.", len(prefix) + 2)
    assert ids == prefix + answer[:2] and start == len(prefix) and cut
    assert model_passes.tokenize(tok, "What is 2 + 3?", "5", len(prefix)) == (prefix, len(prefix), True)
    assert model_passes.tokenize(tok, "What is 2 + 3?", "5", 3) == (prefix[:3], 3, True)


def test_over_long_prompt_ranks_last_in_its_cluster_and_the_run_goes_on(arithmetic, tmp_path, capsys):
    """A prompt that fills ``--max-length`` by itself: NLL inf in the model pass, written as the largest finite
    difficulty + 1, so it ranks last in its cluster ([authors' code] Richard-zrx/ADS @ a4717d3
    src/compute_difficulty.py:120-127, src/sort_clusters_by_difficulty.py:56-61); the run goes on, prints the
    count and names the row in the summary; every value written is finite and the ADS selector orders it last."""
    rows, long = read_rows(arithmetic), 7
    rows[long]["prompt"] = [{"role": "user", "content": " ".join([rows[long]["prompt"][-1]["content"]] * 4)}]
    inp, out = write_rows(rows, tmp_path / "long.parquet"), tmp_path / "out.parquet"
    assert _run(inp, out, "--solution-field", "worked", "--max-length", "96") == 0  # the other rows: <= 78 tokens
    printed = capsys.readouterr().out
    assert f"over-long prompts: 1 of {N_ROWS}: the prompt fills --max-length 96" in printed and "; rows 7\n" in printed

    written = read_rows(out)
    labels, diff = _check_columns(written)
    assert np.isfinite(diff).all() and diff[long] == np.delete(diff, long).max() + 1.0
    info = written[long]["extra_info"]
    assert info["cluster_size"] > 1 and info["rank_in_cluster"] == info["cluster_size"] - 1
    summary = json.loads(out.with_suffix(".clusters.json").read_text())
    assert summary["over_long_prompts"] == 1 and summary["over_long_rows"] == [long]
    assert summary["over_long_difficulty"] == diff[long] and summary["truncated_rows"] == 1
    chunk = np.load(Path(summary["chunks"][f"causal_lm:{TINY}"]["cache"]) / f"chunk_{long // CHUNK:05d}.npz")
    assert np.isposinf(chunk["nll"][long % CHUNK]) and chunk["solution_tokens"][long % CHUNK] == 0
    assert np.isfinite(np.delete(chunk["nll"], long % CHUNK)).all()

    pool = TaskPool(np.array([r["extra_info"]["index"] for r in written]),
                    {c: np.array([r["extra_info"][c] for r in written]) for c in NEW})
    _, orders = cluster_orders(pool, AdsSelectorConfig())
    assert orders[labels[long]][-1] == long
    _, (whole,) = cluster_orders(pool, AdsSelectorConfig(clusters_per_step=1, inter_cluster=False,
                                                         global_order_column="difficulty"))
    assert whole[-1] == long


def test_several_user_messages_are_embedded_joined(arithmetic, tmp_path):
    """A prompt's user messages, stripped, empty ones left out, joined by a blank line, are the question embedded and
    scored ([authors' code] Richard-zrx/ADS @ a4717d3 src/data_utils.py:55-65, 76-79; before: the last one only)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows, r = read_rows(arithmetic), 3
    last = rows[r]["prompt"][-1]["content"]
    rows[r]["prompt"] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Solve this. "},
                         {"role": "assistant", "content": "Which one?"}, {"role": "user", "content": " "},
                         {"role": "user", "content": last}]
    inp, out = write_rows(rows, tmp_path / "multi.parquet"), tmp_path / "out.parquet"
    settings = Settings(str(inp), str(out), clusters=K, solution_field="worked")
    questions = load_samples(settings)[1]
    assert questions[r] == "Solve this.\n\n" + last.strip()
    assert questions[r + 1] == rows[r + 1]["prompt"][-1]["content"].strip()  # one user message: its text

    assert _run(inp, out, "--solution-field", "worked") == 0
    summary = json.loads(out.with_suffix(".clusters.json").read_text())
    chunk = np.load(Path(summary["chunks"][f"causal_lm:{TINY}"]["cache"]) / f"chunk_{r // CHUNK:05d}.npz")
    path = embedded_model_path(num_layers=2)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prefix = tok(f"Question:\nSolve this.\n\n{last.strip()}\n\nAnswer:\n", add_special_tokens=False)["input_ids"]
    ids = prefix + tok(worked_solution(rows[r]), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0]
    np.testing.assert_allclose(chunk["embedding"][r % CHUNK], hidden.mean(0).numpy(), atol=1e-4)


def test_finite_difficulty_refuses_nan_and_all_over_long():
    difficulty, over_long = clustering.finite_difficulty(np.array([0.5, np.inf, 2.0, np.inf]))
    assert difficulty.tolist() == [0.5, 3.0, 2.0, 3.0] and over_long.tolist() == [1, 3]
    with pytest.raises(ValueError, match=r"NaN or -inf for 1 rows, e.g. rows \[2\]"):
        clustering.finite_difficulty(np.array([0.5, np.inf, np.nan]))
    with pytest.raises(ValueError, match="every prompt fills --max-length"):
        clustering.finite_difficulty(np.array([np.inf, np.inf]))


def test_openr1_rows_carry_their_first_passing_trace_as_target(tmp_path):
    """The OpenR1 source keeps, as extra_info.target, the first generation that is Math-Verify-correct, complete
    and short enough (the authors' ``target``), which ``--solution-field extra_info.target`` reads."""
    from data_prep.sources import openr1

    frame = pd.read_parquet(Path(__file__).resolve().parents[1] / "fixtures" / "hub" / "openr1_math_default.parquet")
    long_trace = frame.at[3, "generations"][0]
    frame.at[3, "generations"] = [long_trace, "<think>4 times 3</think> \\boxed{12}"]  # the first is too long
    frame.to_parquet(tmp_path / "openr1.parquet")
    rows = openr1.convert(str(tmp_path / "openr1.parquet"), max_tokens=50, count_tokens=lambda t: len(t.split()))
    # row 0: its first generation is wrong, the second is taken; row 3: the first is over 50 words
    assert [r["extra_info"]["target"] for r in rows] == ["<think>x=2</think> \\boxed{2}",
                                                         "<think>4 times 3</think> \\boxed{12}"]
    assert solution_of(rows[1], "extra_info.target") == "<think>4 times 3</think> \\boxed{12}"
