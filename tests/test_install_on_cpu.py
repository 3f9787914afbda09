"""``make install`` compiles the environment's modules itself: ``pip install --no-compile``, then ``compileall`` on
every core (pip compiles on one). What a process imports from the environment then has current bytecode; without
it, a machine with ``PYTHONDONTWRITEBYTECODE=1`` (this one) compiles torch & co. in every process, every time."""

import importlib.util
import os
import struct
import sys
import sysconfig
from pathlib import Path


def current_bytecode(source: str) -> bool:
    """A timestamp-checked ``.pyc`` beside ``source`` whose header holds the source's mtime and size (PEP 552)."""
    pyc = Path(importlib.util.cache_from_source(source))
    if not pyc.is_file():
        return False
    header = pyc.read_bytes()[:16]
    st = os.stat(source)
    return header[:4] == importlib.util.MAGIC_NUMBER and header[4:8] == b"\0\0\0\0" and \
        header[8:16] == struct.pack("<II", int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)


def test_what_a_process_imports_from_the_environment_is_compiled():
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import verl  # noqa: F401

    purelib = Path(sysconfig.get_path("purelib"))
    sources = [m.__file__ for m in list(sys.modules.values())
               if getattr(m, "__file__", None) and m.__file__.endswith(".py") and purelib in Path(m.__file__).parents]
    assert len(sources) > 1000, len(sources)  # torch, transformers and verl alone import thousands
    missing = [s for s in sources if not current_bytecode(s)]
    assert not missing, f"{len(missing)} of {len(sources)} without current bytecode, e.g. {missing[:3]}"
