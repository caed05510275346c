"""Shared constants for the health-check tests."""

from __future__ import annotations

from tests.support.fake_vllm import ServerFactory

MODEL = "google/gemma-4-12B-it"
FAST = ["--backoff-max-seconds", "0.05", "--timeout-seconds", "5"]
"""CLI flags that keep the tests fast: short backoff and deadline."""

__all__ = ["FAST", "MODEL", "ServerFactory"]
