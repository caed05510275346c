"""Shared names for the benchmark tests (fixtures live in tests/conftest.py)."""

from __future__ import annotations

from tests.support.fake_vllm import ServerFactory

MODEL = "google/gemma-4-12B-it"


__all__ = ["MODEL", "ServerFactory"]
