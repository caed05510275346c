"""``python -m mcp_server``."""

import sys

from .server import main

raise SystemExit(main(sys.argv[1:]))
