"""``make install`` compiles the environment's modules itself: ``pip install --no-compile``, then ``compileall`` on
every core (pip compiles on one). Where Python does not write bytecode (``PYTHONDONTWRITEBYTECODE=1``, as on the
project's development VMs), a module installed without its bytecode is compiled again by every process that imports
it; where Python writes it, the first import does, and there is nothing to check."""

import importlib.util
import os
import struct
import sys
import sysconfig
from pathlib import Path

import pytest


def current_bytecode(source: str) -> bool:
    """A timestamp-checked ``.pyc`` where the import system looks for ``source``'s (``cache_from_source``), whose
    header holds the source's mtime and size (PEP 552)."""
    pyc = Path(importlib.util.cache_from_source(source))
    if not pyc.is_file():
        return False
    header = pyc.read_bytes()[:16]
    st = os.stat(source)
    return header[:4] == importlib.util.MAGIC_NUMBER and header[4:8] == b"\0\0\0\0" and \
        header[8:16] == struct.pack("<II", int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)


@pytest.mark.skipif(not sys.flags.dont_write_bytecode, reason="Python writes bytecode here: imports compile what "
                                                              "the install left out")
def test_what_a_process_imports_from_the_environment_is_compiled():
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import verl  # noqa: F401

    roots = {Path(sysconfig.get_path(k)).resolve() for k in ("purelib", "platlib")}
    sources = [str(Path(m.__file__).resolve()) for m in list(sys.modules.values())
               if getattr(m, "__file__", None) and m.__file__.endswith(".py")]
    sources = [s for s in sources if roots & set(Path(s).parents)]
    assert len(sources) > 1000, len(sources)  # 2,742 in this test alone (2026-12-03)
    missing = [s for s in sources if not current_bytecode(s)]
    assert not missing, (f"{len(missing)} of {len(sources)} imported modules have no current bytecode, e.g. "
                         f"{missing[:3]}: `python -m compileall` on the environment's site-packages compiles them")
