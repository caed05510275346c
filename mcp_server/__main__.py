"""``python -m mcp_server``: the same as ``gemma4 mcp`` (its edges guarded alike)."""

import sys

from gemma4.cli import process_main

raise SystemExit(process_main(["mcp", *sys.argv[1:]]))
