"""``python -m prism_cli``: the ``prism`` command line without its console script."""

from ._main import main

if __name__ == "__main__":
    raise SystemExit(main())
