"""An MCP server for operating the Gemma 4 vLLM deployments from an agent CLI.

``python -m mcp_server -s l4`` serves the read-only tools over stdio; see
:func:`mcp_server.cli.main` for the options (the command-line layer: this package does not
import it) and README "MCP server" for the tools.
"""

from .server import ACTIONS, build_server

__all__ = ["ACTIONS", "build_server"]
