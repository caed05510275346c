"""``python -m mcp_server``."""

import sys

from .cli import main

raise SystemExit(main(sys.argv[1:]))
