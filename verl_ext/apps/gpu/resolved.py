"""The GPU install's resolved set (``make gpu-resolve``: ``scripts/gpu_install/py3.X.txt``), read as pip reads it:
the wheelhouse takes its versions from it (``scripts/bare_gpu/wheelhouse.sh``), a test checks it against what
``make install-gpu`` asks for (``tests/test_gpu_install_on_cpu.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name

PINNED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;]+)")


def pins(text: str, where: str = "the resolved set") -> dict[str, str]:
    """``{canonical name: version}`` of ``name==version`` lines; a line that is neither that nor a comment is an
    error naming ``where`` and the line."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = PINNED.fullmatch(line)
        if not match:
            raise ValueError(f"{where}, line {n}: not a pinned requirement: {line!r}")
        out[canonicalize_name(match[1])] = match[3]
    return out


def read(path: str | Path) -> dict[str, str]:
    """:func:`pins` of the file at ``path``."""
    return pins(Path(path).read_text(), str(path))
