"""What a run writes: the cluster columns into the rows, and beside the output file the summary (JSON), the
clustered space by ``extra_info.index`` (``.npy``, ``selector=dots``'s ``embedding_file``) and the plot."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from data_prep.ads.cluster_plot import plot
from data_prep.ads.clustering import embedding_table, rank_in_clusters
from data_prep.ads.settings import Settings
from data_prep.ads.texts import COLUMNS, PREFIX_TEMPLATE


def add_columns(rows: list[dict], prefix: str, labels: np.ndarray, difficulty: np.ndarray) -> None:
    """``extra_info.{prefix}cluster_id``, ``rank_in_cluster``, ``cluster_size`` and ``difficulty`` of every row."""
    rank, size = rank_in_clusters(labels, difficulty)
    for r, row in enumerate(rows):
        row["extra_info"] = {**row["extra_info"], f"{prefix}cluster_id": int(labels[r]),
                             f"{prefix}rank_in_cluster": int(rank[r]), f"{prefix}cluster_size": int(size[r]),
                             f"{prefix}difficulty": float(difficulty[r])}


@dataclass(frozen=True)
class OutputPaths:
    """``--summary``, ``--plot`` and ``--embeddings``, by default ``OUT_STEM.{prefix}clusters.json`` etc."""

    summary: Path
    plot: Path
    embeddings: Path

    @classmethod
    def of(cls, s: Settings) -> "OutputPaths":
        stem = Path(s.out).with_suffix("")
        return cls(summary=Path(s.summary) if s.summary else Path(f"{stem}.{s.prefix}clusters.json"),
                   plot=Path(s.plot) if s.plot else Path(f"{stem}.{s.prefix}clusters.png"),
                   embeddings=Path(s.embeddings) if s.embeddings else Path(f"{stem}.{s.prefix}embeddings.npy"))


def summarize(s: Settings, paths: OutputPaths, found: dict, policy: dict, embed_meta: dict, *, difficulty: np.ndarray,
              over_long: np.ndarray, rows: int, device: str, dtype: str, chunks: dict, timings: dict) -> dict:
    """The run's summary: settings, model and clustering facts, the over-long prompts (``over_long``: their rows,
    :func:`~data_prep.ads.clustering.finite_difficulty`), and size and difficulty per cluster."""
    labels = found["labels"]
    k = int(labels.max()) + 1
    per_cluster = []
    for c in range(k):
        d = difficulty[labels == c]
        per_cluster.append({"cluster_id": c, "size": int(len(d)), "mean_difficulty": float(d.mean()),
                            "min_difficulty": float(d.min()), "max_difficulty": float(d.max())})
    return {
        "input": s.input, "output": str(Path(s.out)), "rows": rows, "columns": [s.prefix + c for c in COLUMNS],
        "difficulty_model": s.model, **embed_meta, "solution_field": s.solution_field,
        "template": PREFIX_TEMPLATE + "{solution}", "clusters_requested": s.clusters, "clusters": k,
        "pca_dims": int(found["pca_dims"]), "pca_explained_variance": float(found["explained_variance"]),
        "kmeans_inertia": float(found["inertia"]), "seed": s.seed, "n_init": s.n_init, "device": device,
        "dtype": dtype, "max_length": s.max_length, "truncated_rows": int(policy["truncated"].sum()),
        "over_long_prompts": len(over_long), "over_long_rows": over_long.tolist(),
        "over_long_difficulty": float(difficulty[over_long[0]]) if len(over_long) else None,
        "solution_tokens_mean": float(policy["solution_tokens"].mean()),
        "difficulty_mean": float(difficulty.mean()), "cluster_size_min": min(c["size"] for c in per_cluster),
        "cluster_size_max": max(c["size"] for c in per_cluster), "per_cluster": per_cluster,
        "chunks": chunks, "timings": timings, "settings": asdict(s),
        "plot": str(paths.plot), "embeddings": str(paths.embeddings),
    }


def write_outputs(s: Settings, paths: OutputPaths, summary: dict, rows: list[dict], found: dict,
                  difficulty: np.ndarray, embed_meta: dict) -> None:
    """The embeddings table, the summary JSON and the plot."""
    paths.summary.parent.mkdir(parents=True, exist_ok=True)
    paths.embeddings.parent.mkdir(parents=True, exist_ok=True)
    np.save(paths.embeddings, embedding_table(np.array([r["extra_info"]["index"] for r in rows]), found["space"]))
    paths.summary.write_text(json.dumps(summary, indent=2) + "\n")
    embedder = f"{embed_meta['embedder']} ({Path(embed_meta['model']).name})"
    plot(paths.plot, found["proj"], found["labels"], difficulty,
         f"ADS clusters of {Path(s.input).name}: embeddings {embedder}, difficulty {Path(s.model).name}")
