"""Fixtures shared by the applications' end-to-end tests."""

from pathlib import Path

import pytest

from verl_ext.models.embedded import embedded_model_path


@pytest.fixture(scope="session")
def truncated_model_cache(tmp_path_factory) -> Path:
    """A ``VERL_EXT_CACHE`` holding only the 2-layer embedded model (linked from the real cache): the demo's and the
    study's e2e tests share the warm start that the first of them trains there (one SFT run instead of two)."""
    root = tmp_path_factory.mktemp("cache")
    base = Path(embedded_model_path(num_layers=2))
    (root / "models").mkdir()
    (root / "models" / base.name).symlink_to(base, target_is_directory=True)
    return root
