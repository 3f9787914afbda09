"""verl's RL parquet schema, row validation and writing.

Every converter builds rows with :func:`make_row` and writes them with :func:`write_rows`.
A row is::

    {"data_source": str, "prompt": [{"role": "user", "content": str}], "ability": str,
     "reward_model": {"style": "rule", "ground_truth": ...},
     "extra_info": {"index": int, "split": str, ...method columns...}}

``extra_info.index`` is the stable task key used by every selector, allocator and filter.
Method-specific columns live in ``extra_info`` (``weak_pass_rate``, ``strong_pass_rate``,
``cluster_id``, ``rank_in_cluster``, ``cluster_size``, ``bucket``, ...).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

REQUIRED_FIELDS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
PASS_RATE_FIELDS = ("weak_pass_rate", "strong_pass_rate")
PARQUET_BATCH_ROWS = 256  # source rows read at a time


class DataError(ValueError):
    """Bad input: the message names the file, the row and the field."""

    def __init__(self, source: str | Path, row: int | None, field: str, problem: str):
        where = f"{source}" + (f", row {row}" if row is not None else "")
        super().__init__(f"{where}, field '{field}': {problem}")
        self.source, self.row, self.field = str(source), row, field


def make_row(
    *,
    data_source: str,
    question: str,
    ability: str,
    ground_truth: Any,
    index: int,
    split: str,
    system: str | None = None,
    **extra: Any,
) -> dict:
    """One verl RL row; ``extra`` goes into ``extra_info``."""
    prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
    return {
        "data_source": data_source,
        "prompt": prompt,
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"index": int(index), "split": split, **extra},
    }


def validate_rows(rows: list[dict], source: str | Path) -> None:
    """Raise :class:`DataError` on the first bad row; nothing is dropped silently."""
    seen: dict[int, int] = {}
    for r, row in enumerate(rows):
        for field in REQUIRED_FIELDS:
            if field not in row or row[field] is None:
                raise DataError(source, r, field, "missing")
        prompt = row["prompt"]
        if not isinstance(prompt, list) or not prompt:
            raise DataError(source, r, "prompt", "must be a non-empty list of chat messages")
        for m in prompt:
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise DataError(source, r, "prompt", f"bad chat message {m!r}")
        if not str(prompt[-1]["content"]).strip():
            raise DataError(source, r, "prompt", "empty prompt")
        if not isinstance(row["reward_model"], dict) or "ground_truth" not in row["reward_model"]:
            raise DataError(source, r, "reward_model.ground_truth", "missing")
        gt = row["reward_model"]["ground_truth"]
        if gt is None or (isinstance(gt, str) and not gt.strip()):
            raise DataError(source, r, "reward_model.ground_truth", "empty")
        info = row["extra_info"]
        if not isinstance(info, dict) or "index" not in info:
            raise DataError(source, r, "extra_info.index", "missing")
        idx = info["index"]
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise DataError(source, r, "extra_info.index", f"must be an integer, got {idx!r}")
        if idx in seen:
            raise DataError(source, r, "extra_info.index", f"duplicate index {idx} (first at row {seen[idx]})")
        seen[idx] = r
        for field in PASS_RATE_FIELDS:
            if field in info:
                v = info[field]
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) and 0.0 <= v <= 1.0
                if not ok:
                    raise DataError(source, r, f"extra_info.{field}", f"must be a number in [0, 1], got {v!r}")


def write_rows(rows: list[dict], path: str | Path, source: str | Path | None = None) -> Path:
    """Validate and write rows as a verl RL parquet file; returns the path."""
    import pandas as pd

    validate_rows(rows, source or path)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def read_rows(path: str | Path) -> list[dict]:
    """Read a verl RL parquet file back into plain Python rows (lists, dicts, scalars)."""
    import pandas as pd

    return [_plain(r) for r in pd.read_parquet(path).to_dict(orient="records")]


def _plain(value: Any) -> Any:
    """numpy arrays / scalars from pyarrow -> plain Python values."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def ground_truth_json(value: Any) -> str:
    """Serialise a structured ground truth (code tests) as the JSON string the verifiers accept."""
    return value if isinstance(value, str) else json.dumps(value)


def record_count(path: str | Path) -> int | None:
    """Rows in a source file when known without reading it (parquet metadata), else None."""
    if Path(path).suffix != ".parquet":
        return None
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def iter_records(path: str | Path) -> Iterable[dict]:
    """Rows of a source file in its own format: .parquet, .jsonl/.json (list or lines), .csv."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix == ".parquet":  # in record batches: GURU's LiveCodeBench files are 3-5 GB
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            yield from (_plain(r) for r in batch.to_pandas().to_dict(orient="records"))
    elif suffix in (".jsonl", ".jsonl.gz"):
        import gzip

        opener = gzip.open if suffix.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line_no, line in enumerate(f):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as e:
                        raise DataError(path, line_no, "<json>", f"invalid JSON: {e}") from e
    elif suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        yield from (data if isinstance(data, list) else data.get("data", [data]))
    elif suffix == ".csv":
        yield from pd.read_csv(path).to_dict(orient="records")
    else:
        raise DataError(path, None, "<file>", f"unsupported format '{suffix}' (parquet, jsonl, json, csv)")
