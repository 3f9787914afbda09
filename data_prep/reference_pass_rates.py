"""Reference pass rates for BOTS (BOTS paper §3.3, App. B.1): ``extra_info.weak_pass_rate`` / ``strong_pass_rate``.

    python -m data_prep.reference_pass_rates --input train.parquet --out train_ref.parquet \\
        --weak-model PATH_OR_HUB_ID --strong-model PATH_OR_HUB_ID [--n 16] [--temperature 1.0] \\
        [--top-p 1.0] [--max-new-tokens 4096] [--backend auto|vllm|hf] [--batch-size 32] [--seed 0] \\
        [--weak-column weak_pass_rate] [--strong-column strong_pass_rate] [--overwrite] \\
        [--samples-out samples.jsonl]

Each reference model samples ``--n`` completions per task (:mod:`data_prep.generation`); the
project's verifier (``verl_ext.rewards.compute_score``) scores them and the pass rate is the number
of completions scoring 1 divided by ``n``. A model ``embedded`` or ``embedded:K`` is the offline
embedded model (``K``: its first ``K`` layers). The models run one after the other, each released
before the next loads; a model is only needed for a column that has values to compute.

Only missing values are computed: a column that every row already has (GURU ships both) is copied,
one that some rows lack is computed for those rows only; ``--overwrite`` recomputes everything. A
missing value is an absent key, null or NaN. The input is checked before any model loads: rows
must follow :mod:`data_prep.schema` and have a ``data_source`` the verifiers know; errors name the
file, the row and the field, and no row is dropped. ``--samples-out`` writes one JSON line per
sample: ``index``, ``role``, ``model``, ``sample``, ``response``, ``score``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable

from tqdm import tqdm

from data_prep import generation
from data_prep.generation import BACKENDS, Sampling
from data_prep.schema import DataError, read_rows, validate_rows, write_rows
from verl_ext.rewards import compute_score
from verl_ext.rewards.data_sources import domain_of

ROLES = ("weak", "strong")


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def load_rows(path: str | Path, columns: Iterable[str]) -> list[dict]:
    """Rows of ``path``, validated; missing pass-rate values (null, NaN) are removed from ``extra_info``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "<file>", "no such file")
    rows = read_rows(path)
    for r, row in enumerate(rows):
        info = row.get("extra_info")
        if not isinstance(info, dict):
            continue  # validate_rows reports it
        if _is_missing(info.get("index")):  # parquet turns the other rows' indices into floats: report this one
            raise DataError(path, r, "extra_info.index", "missing")
        for column in columns:
            if column not in info:
                continue
            value = info[column]
            if _is_missing(value):
                del info[column]
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise DataError(path, r, f"extra_info.{column}", f"must be a number in [0, 1] or null, got {value!r}")
    validate_rows(rows, path)
    for r, row in enumerate(rows):
        try:
            domain_of(str(row["data_source"]))
        except KeyError as e:
            raise DataError(path, r, "data_source", e.args[0]) from None
    return rows


def pass_rates(rows: list[dict], positions: list[int], model: str, sampling: Sampling, *, role: str,
               backend: str = "auto", batch_size: int = 32, samples: IO[str] | None = None) -> list[float]:
    """Pass rate of ``model`` on ``rows[p]`` for each ``p`` in ``positions`` (``sampling.n`` samples each)."""
    completions = generation.generate(model, [rows[p]["prompt"] for p in positions], sampling,
                                      backend=backend, batch_size=batch_size)
    rates = []
    for p, texts in zip(positions, tqdm(completions, desc=f"scoring {role}", unit="task"), strict=True):
        row = rows[p]
        if len(texts) != sampling.n:
            raise RuntimeError(f"{model}: {len(texts)} completions for row {p}, expected {sampling.n}")
        scores = [compute_score(row["data_source"], text, row["reward_model"]["ground_truth"], row["extra_info"])["score"]
                  for text in texts]
        if samples is not None:
            for j, (text, score) in enumerate(zip(texts, scores)):
                record = {"index": row["extra_info"]["index"], "role": role, "model": model, "sample": j,
                          "response": text, "score": score}
                samples.write(json.dumps(record) + "\n")
        rates.append(sum(s >= 1.0 for s in scores) / sampling.n)
    return rates


def summary(rows: list[dict], weak_column: str, strong_column: str) -> dict[str, float]:
    """Mean weak / strong pass rate and the fraction of tasks with weak <= strong."""
    weak = [row["extra_info"][weak_column] for row in rows]
    strong = [row["extra_info"][strong_column] for row in rows]
    n = max(len(rows), 1)
    return {"weak_mean": sum(weak) / n, "strong_mean": sum(strong) / n,
            "weak_le_strong": sum(w <= s for w, s in zip(weak, strong)) / n}


@dataclass(frozen=True)
class RefConfig:
    """What ``python -m data_prep.reference_pass_rates`` computes (its flags, one field each)."""

    input: str
    out: str
    weak_model: str | None = None
    strong_model: str | None = None
    n: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 4096
    backend: str = "auto"
    batch_size: int = 32
    seed: int = 0
    weak_column: str = "weak_pass_rate"
    strong_column: str = "strong_pass_rate"
    overwrite: bool = False
    samples_out: str | None = None

    def __post_init__(self):
        if self.weak_column == self.strong_column:
            raise ValueError("--weak-column and --strong-column must differ")
        if self.n < 1 or self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("--n, --max-new-tokens and --batch-size must be >= 1")


class MissingModel(ValueError):
    """A column has values to compute and its model is not given."""


def run(config: RefConfig) -> dict[str, float]:
    """Fill the missing pass rates of ``config.input`` into ``config.out``; returns :func:`summary` of the rows.
    Raises :class:`~data_prep.schema.DataError` (bad input) or :class:`MissingModel`."""
    columns = {"weak": config.weak_column, "strong": config.strong_column}
    models = {"weak": config.weak_model, "strong": config.strong_model}
    sampling = Sampling(n=config.n, temperature=config.temperature, top_p=config.top_p,
                        max_new_tokens=config.max_new_tokens, seed=config.seed)
    rows = load_rows(config.input, columns.values())
    todo = {role: [p for p, row in enumerate(rows) if config.overwrite or columns[role] not in row["extra_info"]]
            for role in ROLES}
    for role in ROLES:
        if todo[role] and not models[role]:
            raise MissingModel(f"{len(todo[role])} of {len(rows)} rows lack extra_info.{columns[role]}: "
                               f"pass --{role}-model")
    if not any(todo.values()):
        print(f"all {len(rows)} rows already have {columns['weak']} and {columns['strong']}: copying "
              "(--overwrite recomputes)")
    for role in ROLES:
        count = len(todo[role])
        if config.overwrite:
            print(f"{columns[role]}: recomputing all {count} rows with {models[role]}")
        elif 0 < count < len(rows):
            print(f"{columns[role]}: computing the {count} of {len(rows)} rows that lack it with {models[role]}, "
                  f"keeping the other {len(rows) - count}")
        elif count:
            print(f"{columns[role]}: computing all {count} rows with {models[role]}")

    with open(config.samples_out, "w", encoding="utf-8") if config.samples_out else contextlib.nullcontext() as samples:
        for role in ROLES:
            if todo[role]:
                rates = pass_rates(rows, todo[role], models[role], sampling, role=role, backend=config.backend,
                                   batch_size=config.batch_size, samples=samples)
                for p, rate in zip(todo[role], rates, strict=True):
                    rows[p]["extra_info"][columns[role]] = rate
    write_rows(rows, config.out, source=config.input)

    s = summary(rows, columns["weak"], columns["strong"])
    print(f"{len(rows)} tasks: mean {columns['weak']} {s['weak_mean']:.4f}, mean {columns['strong']} "
          f"{s['strong_mean']:.4f}, weak <= strong on {s['weak_le_strong']:.1%}")
    print(f"wrote {config.out}" + (f" and {config.samples_out}" if config.samples_out else ""))
    return s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.reference_pass_rates", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="verl RL parquet file")
    parser.add_argument("--out", required=True, help="output parquet file (may be --input)")
    parser.add_argument("--weak-model", help="weak reference model: path, hub id, embedded or embedded:K")
    parser.add_argument("--strong-model", help="strong reference model: path, hub id, embedded or embedded:K")
    parser.add_argument("--n", type=int, default=16, help="samples per task and model (default: 16)")
    parser.add_argument("--temperature", type=float, default=1.0, help="<= 0: greedy (default: 1.0)")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=4096)
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto: vllm if installed and CUDA is available, else hf")
    parser.add_argument("--batch-size", type=int, default=32, help="hf backend: sequences per generate call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weak-column", default="weak_pass_rate", help="extra_info key for the weak model")
    parser.add_argument("--strong-column", default="strong_pass_rate", help="extra_info key for the strong model")
    parser.add_argument("--overwrite", action="store_true", help="recompute values already present")
    parser.add_argument("--samples-out", help="JSONL file with every sample and its score")
    try:
        config = RefConfig(**vars(parser.parse_args(argv)))
    except ValueError as e:
        parser.error(str(e))
    try:
        run(config)
    except MissingModel as e:
        parser.error(str(e))
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
