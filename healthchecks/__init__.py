"""Post-deploy health checks for a vLLM endpoint: readiness, served model, a chat smoke test and
a ``/metrics`` summary. The Pulumi resource hook is :mod:`healthchecks.hook` (the only module
importing pulumi); talking to the endpoint is :mod:`endpoint`'s."""
