"""Test support: a fake vLLM server shared by the health-check and benchmark tests."""
