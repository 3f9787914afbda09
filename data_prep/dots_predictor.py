"""DOTS's trained difficulty predictor (``selector.predictor=adapter``) from measured pass rates of several policies.

    python -m data_prep.dots_predictor --input pass_rates.parquet --out dots_predictor.pt \\
        --pass-rate-columns COL [COL ...] (--embeddings train.embeddings.npy | --model PATH|embedded[:K]) \\
        [--ref-fraction 0.2] [--held-out-fraction 0.1] [--split-seed 0] [--ref-size 256] [--batch-size 256] \\
        [--epochs 20] [--lr 1e-3] [--warmup-steps 100] [--hidden-size 896] [--num-layers 3] [--seed 1] \\
        [--summary FILE] [--embeddings-out FILE] [--embed-batch-size 16] [--device auto|cpu|cuda]

The input is a training parquet whose rows carry, as ``extra_info`` columns, the measured pass rates of several
policies over the same prompts (one column per policy, e.g. ``python -m data_prep.reference_pass_rates`` run with
other ``--weak-column`` / ``--strong-column`` names; null / NaN = not measured). Rows are keyed by
``extra_info.index``. The prompt embeddings are either a table ``[max index + 1, D]`` (row ``i`` = the prompt with
``extra_info.index`` ``i``), e.g. the ``train.embeddings.npy`` that ``python -m data_prep.ads_clusters`` writes and
``selector.embedding_file`` reads, or computed here with ``--model``: the mean of the model's final-layer hidden
states over the tokens of the prompt's question, as the authors' ``adaptive_difficulty_prediction/save_embedding.py``
(:72-109; [decision] right padding, so every prompt keeps its position ids) and written as such a table
(``--embeddings-out``, default ``OUT_STEM.embeddings.npy``). The run needs the same table as ``embedding_file``.

**Split** [decision]: the authors' code (ASTRAL-Group/data-efficient-llm-rl @ 59df918) leaves it to the user
(``adaptive_difficulty_prediction/load_data.py:15-51``: ``data_train.pkl`` for queries and ``data_ref.pkl`` for
reference candidates, prepared apart; README step 1). Here the prompts measured by every policy are shuffled
(``--split-seed``): ``--held-out-fraction`` of them are held out for the summary, ``--ref-fraction`` become reference
candidates, the rest queries. Rows that some policies did not measure are left out (counted); a row no policy
measured is an error.

**Training** [authors' code]: :func:`verl_ext.axes.dots_predictor.train_adapter` with their settings as defaults
(``adaptive_difficulty_prediction/run_bash/run_train.sh``) on ``--device`` (auto: cuda when visible), then
:func:`~verl_ext.axes.dots_predictor.save_adapter` (CPU tensors).
**Summary** (``--summary``, default ``OUT_STEM.json``): rows, policies, split, settings and, on the training queries
and the held-out prompts, each policy's prompts predicted from ``--ref-size`` reference candidates drawn with seeds
1-5 as the authors' evaluation (``train.py`` ``evaluate_test_groups``; ``load_data.py:53-73``): BCE and mean absolute
error of the adapter, of the adapter after the selector's least-squares line fitted on the reference set's own
predictions (``train.py`` / ``utils.py`` ``calibrate_predictions``), and of the constant predictor (the reference
set's mean pass rate).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from data_prep.schema import DataError, read_rows

EVAL_SEEDS = (1, 2, 3, 4, 5)  # [authors' code] train.py evaluate_test_groups
EPS = 1e-4  # BCE clamp, as the adapter's own clamp of its base prediction


@dataclass(frozen=True)
class PassRateTable:
    """``index`` [N] (``extra_info.index``) and ``pass_rate`` [P, N] (NaN: not measured) of ``columns``."""

    index: np.ndarray
    pass_rate: np.ndarray
    columns: tuple[str, ...]


def resolve_device(device: str) -> str:
    """``auto``: cuda when visible, else cpu."""
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def load_pass_rates(path: str | Path, columns: list[str]) -> PassRateTable:
    """The pass-rate table of ``path``; :class:`DataError` names the file, row and field of bad input."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "<file>", "no such file")
    rows = read_rows(path)
    if not rows:
        raise DataError(path, None, "<rows>", "no rows")
    index, table, seen = [], np.full((len(columns), len(rows)), np.nan), {}
    for r, row in enumerate(rows):
        info = row.get("extra_info")
        if not isinstance(info, dict):
            raise DataError(path, r, "extra_info", "missing or not a mapping")
        key = info.get("index")
        if (_missing(key) or isinstance(key, bool) or not isinstance(key, (int, float)) or not float(key).is_integer()
                or key < 0):
            raise DataError(path, r, "extra_info.index", f"must be an integer >= 0, got {key!r}")
        if int(key) in seen:
            raise DataError(path, r, "extra_info.index", f"{int(key)} repeats row {seen[int(key)]}")
        seen[int(key)] = r
        index.append(int(key))
        for p, column in enumerate(columns):
            value = info.get(column)
            if _missing(value):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise DataError(path, r, f"extra_info.{column}", f"must be a number in [0, 1] or null, got {value!r}")
            table[p, r] = value
    for p, column in enumerate(columns):
        if np.all(np.isnan(table[p])):
            raise DataError(path, None, f"extra_info.{column}", "no row has a value in this pass-rate column "
                            f"(extra_info has: {sorted(set().union(*(row['extra_info'] for row in rows)))})")
    unmeasured = np.flatnonzero(np.all(np.isnan(table), axis=0))
    if len(unmeasured):
        r = int(unmeasured[0])
        raise DataError(path, r, f"extra_info.{{{','.join(columns)}}}", f"no policy measured this prompt "
                        f"(extra_info.index {index[r]}; {len(unmeasured)} such rows): drop it or measure it")
    return PassRateTable(np.array(index, dtype=np.int64), table, tuple(columns))


def read_embeddings(path: str | Path, index: np.ndarray, source: str | Path) -> np.ndarray:
    """Rows ``index`` of the table at ``path`` (row ``i`` = ``extra_info.index`` ``i``), checked finite."""
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise DataError(path, None, "<file>", f"cannot read the embeddings table: {e}") from None
    if table.ndim != 2 or not table.shape[1]:
        raise DataError(path, None, "<shape>", f"{table.shape}, expected [max extra_info.index + 1, D]")
    beyond = np.flatnonzero(index >= len(table))
    if len(beyond):
        r = int(beyond[0])
        raise DataError(source, r, "extra_info.index", f"{int(index[r])} has no row in {path} ({len(table)} rows, "
                        f"row i = index i; {len(beyond)} such rows): embeddings of another file?")
    emb = np.asarray(table[index], dtype=np.float32)
    bad = np.flatnonzero(~np.all(np.isfinite(emb), axis=1))
    if len(bad):
        r = int(bad[0])
        raise DataError(source, r, "extra_info.index", f"{int(index[r])}: its row in {path} is not finite (an index "
                        f"the embeddings were not computed for; {len(bad)} such rows): embeddings of another file?")
    return emb


def problem_of(row: dict) -> str:
    """The prompt's last user message, stripped, for the authors' ``problem`` column (save_embedding.py:31-33)
    [decision]: in a chat prompt the earlier user messages are other turns (e.g. few-shot examples), not the problem
    (ADS joins them all: :func:`data_prep.ads.texts.question_of`)."""
    users = [m for m in row["prompt"] if m.get("role") == "user"]
    return str(users[-1].get("content") or "").strip() if users else ""


def question_embeddings(path: str | Path, index: np.ndarray, model: str, batch_size: int, device: str) -> np.ndarray:
    """Mean final-layer hidden state over the tokens of each row's question (the authors' save_embedding.py:72-109,
    tokenizer defaults), rows in ``index`` order."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModel, AutoTokenizer

    from data_prep.generation import resolve_model

    rows = {int(row["extra_info"]["index"]): row for row in read_rows(path)}
    questions = []
    for r, key in enumerate(index.tolist()):
        text = problem_of(rows[key])
        if not text:
            raise DataError(path, r, "prompt", "empty prompt: no user message text to embed")
        questions.append(text)
    device = resolve_device(device)
    local = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(local)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    encoder = AutoModel.from_pretrained(local, dtype=torch.float32).to(device).eval()
    out = []
    with torch.inference_mode():
        for start in tqdm(range(0, len(questions), batch_size), desc=f"embedding {Path(local).name}", unit="batch"):
            batch = tokenizer(questions[start:start + batch_size], padding=True, return_tensors="pt").to(device)
            hidden = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            out.append(((hidden * mask).sum(1) / mask.sum(1)).cpu().numpy())
    return np.concatenate(out).astype(np.float32)


def split_rows(n: int, ref_fraction: float, held_out_fraction: float, seed: int) -> dict[str, np.ndarray]:
    """Positions of the queries, reference candidates and held-out prompts: a seeded shuffle cut by fractions."""
    order = np.random.default_rng(seed).permutation(n)
    held, ref = int(round(held_out_fraction * n)), int(round(ref_fraction * n))
    return {"held_out": np.sort(order[:held]), "ref": np.sort(order[held:held + ref]),
            "query": np.sort(order[held + ref:])}


def _bce(pred: np.ndarray, target: np.ndarray) -> float:
    p = np.clip(pred, EPS, 1 - EPS)
    return float(-np.mean(target * np.log(p) + (1 - target) * np.log(1 - p)))


def evaluate(model, emb: np.ndarray, pass_rate: np.ndarray, rows: np.ndarray, ref_rows: np.ndarray,
             ref_size: int) -> dict[str, float]:
    """Mean over policies and seeds 1-5 of BCE / MAE of ``rows`` predicted from ``ref_size`` drawn candidates: the
    adapter, the adapter after the least-squares line of the reference set's own predictions, the reference mean."""
    from verl_ext.axes.dots_predictor import predict_pass_rate

    scores: dict[str, list[float]] = {k: [] for k in ("bce", "mae", "calibrated_mae", "constant_bce", "constant_mae")}
    for seed in EVAL_SEEDS:
        refs = np.random.default_rng(seed).choice(ref_rows, size=ref_size, replace=False)
        for p in range(len(pass_rate)):
            target, ref_pass = pass_rate[p, rows], pass_rate[p, refs]
            pred = predict_pass_rate(model, emb[rows], emb[refs], ref_pass)
            own = predict_pass_rate(model, emb[refs], emb[refs], ref_pass)
            var = np.var(own)
            slope = float(np.mean((own - own.mean()) * (ref_pass - ref_pass.mean())) / var) if var > 1e-12 else 0.0
            line = slope * pred + ref_pass.mean() - slope * own.mean()
            constant = np.full(len(rows), ref_pass.mean())
            scores["bce"].append(_bce(pred, target))
            scores["mae"].append(float(np.mean(np.abs(pred - target))))
            scores["calibrated_mae"].append(float(np.mean(np.abs(line - target))))
            scores["constant_bce"].append(_bce(constant, target))
            scores["constant_mae"].append(float(np.mean(np.abs(constant - target))))
    return {"prompts": int(len(rows)), **{k: float(np.mean(v)) for k, v in scores.items()}}


@dataclass(frozen=True)
class Options:
    """What shapes the predictor; the training values are the authors' (run_train.sh) unless marked."""

    ref_fraction: float = 0.2  # [decision] share of the prompts that are reference candidates
    held_out_fraction: float = 0.1  # [decision] share held out for the summary
    split_seed: int = 0  # [decision]
    ref_size: int = 256
    batch_size: int = 256
    epochs: int = 20
    lr: float = 1e-3
    warmup_steps: int = 100
    hidden_size: int = 896
    num_layers: int = 3
    seed: int = 1

    def check(self) -> None:
        if not (0 < self.ref_fraction < 1 and 0 <= self.held_out_fraction < 1
                and self.ref_fraction + self.held_out_fraction < 1):
            raise ValueError("--ref-fraction must lie in (0, 1), --held-out-fraction in [0, 1), their sum below 1")
        if min(self.batch_size, self.epochs, self.hidden_size, self.num_layers) < 1 or self.ref_size < 2:
            raise ValueError("--batch-size, --epochs, --hidden-size, --num-layers must be >= 1, --ref-size >= 2")
        if self.lr <= 0 or self.warmup_steps < 0:
            raise ValueError("--lr must be > 0 and --warmup-steps >= 0")


def run(input_path: str, out: str, columns: list[str], options: Options, *, embeddings: str | None = None,
        model: str | None = None, summary_path: str | None = None, embeddings_out: str | None = None,
        embed_batch_size: int = 16, device: str = "auto") -> dict:
    """Load, split, train, save the adapter and the summary; returns the summary."""
    import torch

    from verl_ext.axes.dots_predictor import AdapterShape, save_adapter, train_adapter

    t0 = time.time()
    options.check()
    if (embeddings is None) == (model is None):
        raise ValueError("give the prompt embeddings as exactly one of --embeddings (a table by extra_info.index, "
                         "e.g. data_prep.ads_clusters' OUT_STEM.embeddings.npy) and --model (computed here)")
    if embed_batch_size < 1:
        raise ValueError(f"--embed-batch-size must be >= 1, got {embed_batch_size}")
    if len(set(columns)) != len(columns) or not columns:
        raise ValueError(f"--pass-rate-columns must name distinct columns, got {columns}")
    table = load_pass_rates(input_path, columns)
    stem = Path(out).with_suffix("")
    if embeddings is not None:
        emb, emb_source = read_embeddings(embeddings, table.index, input_path), str(embeddings)
    else:
        from data_prep.ads.clustering import embedding_table

        emb = question_embeddings(input_path, table.index, model, embed_batch_size, device)
        emb_source = str(embeddings_out or f"{stem}.embeddings.npy")
        Path(emb_source).parent.mkdir(parents=True, exist_ok=True)
        np.save(emb_source, embedding_table(table.index, emb))
    complete = np.flatnonzero(np.all(np.isfinite(table.pass_rate), axis=0))
    split = {k: complete[v] for k, v in split_rows(len(complete), options.ref_fraction, options.held_out_fraction,
                                                   options.split_seed).items()}
    if len(split["ref"]) < options.ref_size or not len(split["query"]):
        raise ValueError(f"{input_path}: {len(complete)} prompts measured by every policy give "
                         f"{len(split['ref'])} reference candidates (--ref-fraction {options.ref_fraction}) and "
                         f"{len(split['query'])} queries: need >= --ref-size {options.ref_size} candidates and a query")
    shape = AdapterShape(emb.shape[1], hidden_size=options.hidden_size, num_layers=options.num_layers)
    device = resolve_device(device)
    with torch.device(device):  # train_adapter's tensors and model are made on the default device
        adapter = train_adapter(emb, table.pass_rate, split["query"], split["ref"], shape, ref_size=options.ref_size,
                                batch_size=options.batch_size, epochs=options.epochs, lr=options.lr,
                                warmup_steps=options.warmup_steps, seed=options.seed)
    adapter = adapter.cpu()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    save_adapter(adapter, out)
    summary = {
        "input": input_path, "predictor_file": out, "embedding_file": emb_source,
        "embedder": model or "table", "embedding_dim": int(emb.shape[1]), "rows": int(len(table.index)),
        "rows_measured_by_every_policy": int(len(complete)),
        "rows_left_out_partly_measured": int(len(table.index) - len(complete)),
        "policies": list(columns),
        "mean_pass_rate": {c: float(np.nanmean(table.pass_rate[p])) for p, c in enumerate(columns)},
        "split": {k: int(len(v)) for k, v in split.items()},
        "train": evaluate(adapter, emb, table.pass_rate, split["query"], split["ref"], options.ref_size),
        "held_out": (evaluate(adapter, emb, table.pass_rate, split["held_out"], split["ref"], options.ref_size)
                     if len(split["held_out"]) else None),
        "settings": asdict(options), "eval_seeds": list(EVAL_SEEDS), "device": device,
        "total_s": round(time.time() - t0, 2),
    }
    summary_file = Path(summary_path or f"{stem}.json")
    summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    return {**summary, "summary": str(summary_file)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.dots_predictor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Options()
    parser.add_argument("--input", required=True, help="training parquet with the policies' pass-rate columns")
    parser.add_argument("--out", required=True, help="predictor file (selector.predictor_file)")
    parser.add_argument("--pass-rate-columns", nargs="+", required=True, help="extra_info columns, one per policy")
    parser.add_argument("--embeddings", help="table by extra_info.index (data_prep.ads_clusters' *.embeddings.npy)")
    parser.add_argument("--model", help="compute the embeddings: path, hub id, embedded or embedded:K")
    parser.add_argument("--embeddings-out", help="--model: the table written (default OUT_STEM.embeddings.npy)")
    parser.add_argument("--embed-batch-size", type=int, default=16)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="training and --model's pass (auto: cuda when visible)")
    parser.add_argument("--summary", help="default OUT_STEM.json")
    for name, value in asdict(d).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value, help=f"default {value}")
    args = vars(parser.parse_args(argv))
    options = Options(**{name: args[name] for name in asdict(d)})
    try:
        s = run(args["input"], args["out"], args["pass_rate_columns"], options, embeddings=args["embeddings"],
                model=args["model"], summary_path=args["summary"], embeddings_out=args["embeddings_out"],
                embed_batch_size=args["embed_batch_size"], device=args["device"])
    except (DataError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{s['rows']} prompts x {len(s['policies'])} policies ({s['rows_left_out_partly_measured']} partly "
          f"measured left out); split {s['split']}")
    for part in ("train", "held_out"):
        m = s[part]
        if m:
            print(f"  {part}: BCE {m['bce']:.4f} (constant {m['constant_bce']:.4f}), MAE {m['mae']:.4f} "
                  f"(calibrated {m['calibrated_mae']:.4f}, constant {m['constant_mae']:.4f})")
    print(f"predictor: {s['predictor_file']}\nsummary: {s['summary']}\n"
          f"run with: selector.predictor=adapter selector.predictor_file={s['predictor_file']} "
          f"selector.embedding_file={s['embedding_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
