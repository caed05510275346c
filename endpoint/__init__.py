"""Talking to a deployed vLLM endpoint: shared by the health checks, the benchmark and the MCP
server. Import from the submodules: ``targets`` (which URL, which credential), ``auth``,
``client`` (capped reads), ``errors`` (a transport failure in words), ``metrics``, ``redact``
and ``limits``. Nothing is imported here, so the plan and the stack-file reader, which need
only ``endpoint.limits`` and ``endpoint.redact``, do not pay for httpx and google-auth."""
