"""``python -m healthchecks``: the same as ``gemma4 health`` (its edges guarded alike)."""

import sys

from gemma4.cli import process_main

raise SystemExit(process_main(["health", *sys.argv[1:]]))
