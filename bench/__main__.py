"""``python -m bench``: see :mod:`bench.cli`."""

from bench.cli import main

# Guarded: worker processes (spawned) import the parent's main module under another name.
if __name__ == "__main__":
    raise SystemExit(main())
