"""Shared constants for the health-check tests."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.fake_vllm import FakeVllmServer

MODEL = "google/gemma-4-12B-it"
FAST = ["--backoff-max-seconds", "0.05", "--timeout-seconds", "5"]
"""CLI flags that keep the tests fast: short backoff and deadline."""

ServerFactory = Callable[..., FakeVllmServer]
