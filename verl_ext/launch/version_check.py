"""Start-up check that the installed verl is the one the recipes were written for."""

from __future__ import annotations

import re
from importlib import metadata, resources

REQUIREMENT_FILE = "REQUIRED_VERL.txt"


def required_verl_version() -> str:
    """The exact verl version pinned in ``verl_ext/REQUIRED_VERL.txt``."""
    text = resources.files("verl_ext").joinpath(REQUIREMENT_FILE).read_text()
    match = re.search(r"^verl(?:\[[^\]]*\])?==([\w.]+)", text, re.MULTILINE)
    if not match:
        raise RuntimeError(f"verl_ext/{REQUIREMENT_FILE} does not pin verl with '==': {text!r}")
    return match.group(1)


def check_verl_version(installed: str | None = None) -> str:
    """Raise ``RuntimeError`` with install instructions unless the pinned verl is installed."""
    required = required_verl_version()
    if installed is None:
        try:
            installed = metadata.version("verl")
        except metadata.PackageNotFoundError:
            installed = None
    if installed != required:
        found = f"verl {installed} is installed" if installed else "verl is not installed"
        raise RuntimeError(
            f"verl-ext needs verl=={required} ({found}). The trainer hooks depend on verl {required}'s "
            f"internals. Install it with: pip install torch==2.13.0 'verl[verl-core,math]=={required}' "
            f"(CPU), or see scripts/README.md 'Install on a GPU machine'."
        )
    return installed
