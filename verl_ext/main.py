"""``python -m verl_ext.main``: the entry point of :mod:`verl_ext.launch.main`."""

from verl_ext.launch.main import main

if __name__ == "__main__":
    main()
