"""``python -m bench``: the same as ``gemma4 bench`` (its edges guarded alike)."""

import sys

# Guarded: worker processes (spawned) import the parent's main module under another name.
if __name__ == "__main__":
    from gemma4.cli import process_main

    raise SystemExit(process_main(["bench", *sys.argv[1:]]))
