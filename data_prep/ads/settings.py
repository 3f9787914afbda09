"""The options of ``python -m data_prep.ads_clusters`` and the checks made before anything is read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

EMBEDDERS = ("policy", "minilm")


@dataclass(frozen=True)
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

    def check(self) -> None:
        """Refuse bad options (``ValueError`` naming the flag) before the input is read."""
        if not re.fullmatch(r"[A-Za-z0-9_]*", self.prefix):
            raise ValueError(f"--prefix must be letters, digits and underscores, got {self.prefix!r}")
        if self.clusters < 1 or self.pca_dims < 1 or self.batch_size < 1 or self.chunk_size < 1:
            raise ValueError("--clusters, --pca-dims, --batch-size and --chunk-size must be >= 1")
        if self.embedder not in EMBEDDERS and not (self.embedder.startswith("embedded") or "/" in self.embedder):
            raise ValueError(f"--embedder must be policy, minilm, embedded[:K] or a model path / hub id, "
                             f"got {self.embedder!r}")
        if Path(self.out).resolve() == Path(self.input).resolve():
            raise ValueError("--out must differ from --input")

    @property
    def cache_root(self) -> Path:
        """``--cache-dir``, by default ``.ads_cache`` next to the output."""
        return Path(self.cache_dir) if self.cache_dir else Path(self.out).parent / ".ads_cache"
