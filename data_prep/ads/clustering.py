"""Semantic clusters as the authors' src/cluster_embeddings.py (L2 norm, randomized PCA, K-Means), the rank of each
row in its cluster by difficulty, and the clustered space as a table by ``extra_info.index``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA

from data_prep.ads.chunk_cache import digest, save_npz
from data_prep.ads.settings import Settings

CLUSTER_CACHE_VERSION = 3  # 2: the PCA space is stored too (the embeddings file); 3: randomized PCA, n_init auto


def cluster(embeddings: np.ndarray, k: int, pca_dims: int, seed: int, n_init: int | str) -> dict[str, np.ndarray]:
    """L2-normalise, PCA (randomized) to ``min(pca_dims, rows - 1, features)`` dims, K-Means, as the authors'
    src/cluster_embeddings.py. Labels are renumbered 0..K'-1 if duplicates leave clusters empty."""
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


def cached_cluster(embeddings: np.ndarray, s: Settings) -> tuple[dict[str, np.ndarray], str]:
    """:func:`cluster` with ``s``'s K, PCA dims, seed and restarts, cached under ``s.cache_root`` by the
    embeddings and those settings; and whether it was ``"computed"`` or ``"reused"``."""
    key = digest({"version": CLUSTER_CACHE_VERSION,
                  "embeddings": hashlib.sha256(np.ascontiguousarray(embeddings).tobytes()).hexdigest(),
                  "k": s.clusters, "pca_dims": s.pca_dims, "seed": s.seed, "n_init": s.n_init})
    cluster_file: Path = s.cache_root / f"clusters-{key[:16]}.npz"
    if cluster_file.is_file():
        return dict(np.load(cluster_file)), "reused"
    found = cluster(embeddings, s.clusters, s.pca_dims, s.seed, s.n_init)
    save_npz(cluster_file, found)
    return found, "computed"


def embedding_table(index: np.ndarray, space: np.ndarray) -> np.ndarray:
    """``[max index + 1, D]`` float32, row ``index[r]`` = ``space[r]``; rows of indices not in the file are NaN."""
    table = np.full((int(index.max()) + 1, space.shape[1]), np.nan, dtype=np.float32)
    table[index] = space
    return table


def finite_difficulty(nll: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The difficulty of every row and the rows of over-long prompts: an infinite NLL (no solution token left,
    :func:`~data_prep.ads.model_passes.tokenize`) becomes the largest finite NLL + 1, so the row ranks last in its
    cluster and every value written is finite ([authors' code] Richard-zrx/ADS @ a4717d3
    src/sort_clusters_by_difficulty.py:56-61). NaN or -inf (a broken forward pass) and all rows over-long are
    refused (``ValueError``) [decision]: the authors would replace NaN too, or write NaN everywhere."""
    over_long = np.flatnonzero(np.isposinf(nll))
    broken = np.flatnonzero(np.isnan(nll) | np.isneginf(nll))
    if len(broken):
        raise ValueError(f"the difficulty (mean NLL) is NaN or -inf for {len(broken)} rows, e.g. rows "
                         f"{broken[:5].tolist()}: a broken forward pass (an overflow in bf16? --dtype fp32)")
    if len(over_long) == len(nll):
        raise ValueError("every prompt fills --max-length: no difficulty to rank by (raise --max-length)")
    difficulty = nll.astype(np.float64)
    difficulty[over_long] = np.delete(difficulty, over_long).max() + 1.0
    return difficulty, over_long


def rank_in_clusters(labels: np.ndarray, difficulty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each row in its cluster by difficulty (easiest 0, ties by row), and its cluster's size."""
    order = np.lexsort((np.arange(len(labels)), difficulty, labels))  # by cluster, then difficulty, then row
    rank = np.empty(len(labels), dtype=np.int64)
    sizes = np.bincount(labels)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank[order] = np.arange(len(labels)) - starts[labels[order]]
    return rank, sizes[labels]
