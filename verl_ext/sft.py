"""``python -m verl_ext.sft``: the entry point of :mod:`verl_ext.launch.sft`."""

import sys

from verl_ext.launch.sft import main

if __name__ == "__main__":
    sys.exit(main())
