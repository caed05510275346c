"""An MCP server for operating the Gemma 4 vLLM deployments from an agent CLI (docs/mcp.md);
:mod:`mcp_server.cli` is its command line."""
