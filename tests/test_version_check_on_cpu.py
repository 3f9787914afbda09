"""The required verl version lives in one file and is checked at start-up with a clear message."""

from importlib import metadata

import pytest

from verl_ext.launch.version_check import check_verl_version, required_verl_version


def test_pinned_version_is_installed():
    assert required_verl_version() == "0.9.1"
    assert check_verl_version() == metadata.version("verl")


def test_mismatch_message_tells_how_to_install():
    with pytest.raises(RuntimeError, match=r"needs verl==0\.9\.1 \(verl 0\.8\.0 is installed\).*pip install"):
        check_verl_version(installed="0.8.0")
