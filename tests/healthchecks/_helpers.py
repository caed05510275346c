"""Shared constants for the health-check tests."""

from __future__ import annotations

from tests.support.fake_vllm import ServerFactory

MODEL = "google/gemma-4-12B-it"
FAST = ["--backoff-max-seconds", "0.05", "--timeout-seconds", "300"]
"""CLI flags that keep the tests fast: short backoff. The deadline is one no test waits for (a
test that needs one ends sooner passes its own): checks that take 0.1 s idle pass however loaded
the machine."""

__all__ = ["FAST", "MODEL", "ServerFactory"]
