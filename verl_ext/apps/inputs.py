"""What the demo and the study train and evaluate on: the warm-started policy, the task pool with reference pass rates,
the held-out tasks and their evaluation, and DOTS's prompt embeddings of the pool; each built once and cached."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TASK = "arithmetic_easy"
WARM_START_STEPS = 12  # x 16 worked answers: held-out accuracy ~0.2, half the tasks inside (0, 1)


def prepare_pool(out: Path, pool: int, eval_tasks: int, seed: int) -> tuple[Path, Path]:
    """The training pool (the first ``pool`` training tasks) and the held-out tasks (verl parquet)."""
    from data_prep import embedded_datasets
    from data_prep.schema import write_rows

    splits = embedded_datasets.GENERATORS[TASK](train_size=16 * WARM_START_STEPS, test_size=eval_tasks, seed=seed)
    if pool > len(splits["train"]):
        raise ValueError(f"--pool {pool}: the {TASK} training split has {len(splits['train'])} tasks")
    data = out / "data"
    return (write_rows(splits["train"][:pool], data / f"pool_{pool}.parquet"),
            write_rows(splits["test"], data / "heldout.parquet"))


@dataclass(frozen=True)
class Inputs:
    """One policy (the warm start), pool with reference pass rates and held-out tasks: the demo's and the study's."""

    warm: str
    pool_ref: Path
    heldout: Path


def prepare_inputs(out: Path, args, seed: int) -> Inputs:
    """The warm start (``--warm-start-steps``, built once and cached), the first ``--pool`` tasks with reference pass
    rates (``--ref-n`` samples; weak: the embedded model, strong: the warm start) and the held-out file under
    ``out/data``, drawn and sampled with ``seed``."""
    from verl_ext.apps.warm_start import WarmStartConfig, warm_start_path

    warm = warm_start_path(WarmStartConfig(task=TASK, steps=args.warm_start_steps, seed=seed, eval_tasks=0,
                                           num_layers=args.num_layers))
    pool_file, heldout = prepare_pool(out, args.pool, max(args.eval_tasks, 1), seed)
    weak = "embedded" if args.num_layers is None else f"embedded:{args.num_layers}"
    return Inputs(warm, reference_pass_rates(pool_file, weak, warm, args.ref_n, args.response_length, seed), heldout)


def reference_pass_rates(pool_file: Path, weak: str, warm: str, n: int, max_new_tokens: int, seed: int) -> Path:
    """``weak_pass_rate`` (``weak``: the embedded model) and ``strong_pass_rate`` (the warm start), ``n`` samples
    per task, computed once per pool, warm start and ``n``."""
    from data_prep import reference_pass_rates as tool

    target = pool_file.with_name(f"{pool_file.stem}.ref.{Path(warm).name}.n{n}.parquet")
    if not target.exists():
        tmp = target.with_name(target.name + ".tmp.parquet")
        tool.run(tool.RefConfig(input=str(pool_file), out=str(tmp), weak_model=weak, strong_model=warm, n=n,
                                temperature=1.0, max_new_tokens=max_new_tokens, backend="hf", batch_size=128,
                                seed=seed))
        tmp.replace(target)
    return target


def heldout_evaluation(heldout: Path, args, **where):
    """The held-out protocol (``--eval-k`` samples a task at T = 1.0, ``--response-length`` tokens, seed ``--seed``)
    as an :class:`eval.evaluate.EvalConfig`; ``where``: ``model`` and ``out``, or ``run``, ``steps`` and
    ``base_model``."""
    from eval.evaluate import EvalConfig

    return EvalConfig(benchmarks=(f"{TASK}={heldout}",), k=args.eval_k, temperature=1.0,
                      max_new_tokens=args.response_length, backend="hf", batch_size=128, seed=args.seed, **where)


def embeddings(data: Inputs) -> Path:
    """DOTS's prompt embeddings of the pool under the policy (``data_prep.ads_clusters``: mean final hidden state of
    question + worked answer; one row per ``extra_info.index``), computed once."""
    from data_prep import ads_clusters
    from data_prep.ads.settings import Settings

    target = data.pool_ref.with_name(f"{data.pool_ref.stem}.embeddings.npy")
    if not target.exists():
        clustered = data.pool_ref.with_name(f"{data.pool_ref.stem}.clusters.parquet")
        ads_clusters.run(Settings(input=str(data.pool_ref), out=str(clustered), model=data.warm,
                                  solution_field="worked", clusters=2, n_init="auto", embeddings=str(target)))
    return target
