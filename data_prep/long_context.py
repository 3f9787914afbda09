"""A local copy of a model whose config allows longer sequences (LUFFY's change to Qwen2.5-Math).

    python -m data_prep.long_context --model Qwen/Qwen2.5-Math-1.5B --out DIR \\
        [--max-position-embeddings 16384] [--rope-theta 40000] [--overwrite]

Qwen2.5-Math ships ``max_position_embeddings = 4096``; verl refuses a rollout ``max_model_len`` above it (and vLLM
too), so the ADS paper's 8,192 generated tokens (16,384 in validation) need a longer context. The ADS paper builds
its data as LUFFY (Yan et al. 2025) did, and LUFFY trains Qwen2.5-Math with ``rope_theta`` raised from 10,000 to
40,000 and a 16k context. This writes ``DIR`` with the model's files linked (weights, tokenizer: nothing copied)
and its ``config.json`` with those two values changed, so the actor (FSDP), the rollout (vLLM) and the evaluation
all load the same changed config from one path. ``--model`` is a local folder or a hub id (downloaded into the
hub cache first). ``DIR/long_context.json`` records the source and the changes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

PROVENANCE = "long_context.json"


def model_dir(model: str) -> Path:
    """A local folder as is; a hub id through the hub cache (``HF_HUB_OFFLINE=1``: the cache only)."""
    if Path(model).is_dir():
        return Path(model).resolve()
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model))


def write(model: str, out: Path, *, max_position_embeddings: int, rope_theta: float, overwrite: bool = False) -> dict:
    """Link every file of ``model`` into ``out`` but ``config.json``, written with the two values changed."""
    if max_position_embeddings < 1 or rope_theta <= 0:
        raise ValueError("--max-position-embeddings must be >= 1 and --rope-theta > 0")
    source = model_dir(model)
    config_path = source / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{source}: no config.json (not a transformers model folder)")
    config = json.loads(config_path.read_text())
    nested = isinstance(config.get("rope_parameters"), dict) and "rope_theta" in config["rope_parameters"]
    if "max_position_embeddings" not in config or not (nested or "rope_theta" in config):
        raise ValueError(f"{config_path}: no max_position_embeddings or rope_theta (top level or in "
                         "rope_parameters); this change applies to RoPE models that set them")
    old_theta = config["rope_parameters"]["rope_theta"] if nested else config["rope_theta"]
    out = Path(out)
    if out.exists():
        if not overwrite:
            raise ValueError(f"{out} exists (--overwrite replaces it)")
        for p in out.iterdir():
            p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(source.iterdir()):
        if f.is_file() and f.name not in ("config.json", PROVENANCE):
            os.symlink(f.resolve(), out / f.name)
    changes = {"max_position_embeddings": [config["max_position_embeddings"], max_position_embeddings],
               "rope_theta": [old_theta, rope_theta]}
    config["max_position_embeddings"] = max_position_embeddings
    if "rope_theta" in config or not nested:  # the hub's Qwen2.5-Math configs: top level
        config["rope_theta"] = rope_theta
    if nested:  # configs saved by recent transformers
        config["rope_parameters"]["rope_theta"] = rope_theta
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    record = {"source": model, "source_dir": str(source), "changes": changes,
              "why": "LUFFY's long-context Qwen2.5-Math (rope_theta 40000, 16k positions), data_prep.long_context"}
    (out / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_prep.long_context", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="local model folder or hub id")
    parser.add_argument("--out", required=True, type=Path, help="the folder to write (links + changed config.json)")
    parser.add_argument("--max-position-embeddings", type=int, default=16384)
    parser.add_argument("--rope-theta", type=float, default=40000.0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    try:
        record = write(args.model, args.out, max_position_embeddings=args.max_position_embeddings,
                       rope_theta=args.rope_theta, overwrite=args.overwrite)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    changed = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in record["changes"].items())
    print(f"{args.out}: {record['source']} with {changed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
