"""Resumable model outputs: arrays per chunk of rows, keyed by what produced them (model, texts, settings)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm


class Interrupted(RuntimeError):
    """``stop_after_chunks`` reached: a rerun of the same command continues from the cache."""


def digest(obj) -> str:
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


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``path`` atomically (a rename), so an interrupted run never leaves half a file."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


class ChunkCache:
    """Arrays for rows ``[c * size, (c + 1) * size)`` in ``DIR/chunk_C.npz``, written atomically."""

    def __init__(self, root: Path, meta: dict, n_rows: int, size: int):
        self.meta, self.n_rows, self.size = meta, n_rows, size
        self.dir = root / f"{meta['step']}-{digest(meta)[:16]}"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        self.computed = self.reused = 0

    @property
    def n_chunks(self) -> int:
        return -(-self.n_rows // self.size)

    @property
    def counts(self) -> dict:
        """What the summary reports of this cache: chunks computed and reused, and where."""
        return {"computed": self.computed, "reused": self.reused, "cache": str(self.dir)}

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
                    raise Interrupted(f"stopped with {len(missing) - self.computed} of {self.n_chunks} "
                                      f"{self.meta['step']} chunks left; rerun the same command to continue")
                save_npz(self.file(c), compute(self.rows(c)))
                self.computed += 1
                if budget is not None:
                    budget[0] -= 1
                bar.update(len(self.rows(c)))
        parts = [dict(np.load(self.file(c))) for c in range(self.n_chunks)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
