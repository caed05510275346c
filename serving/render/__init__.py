"""Rendering: settings to what runs (the `vllm serve` argument list and environment, the TPU
startup script, the GKE Kubernetes manifests, the monitoring objects), as plain data."""
