"""Shared names for the benchmark tests (fixtures live in tests/conftest.py)."""

from __future__ import annotations

from tests.support.fake_vllm import ServerFactory

MODEL = "google/gemma-4-12B-it"


def quick_run(requests: int) -> list[str]:
    """`bench run` options for a short, quiet run: `requests` per cell, no warm-up, no progress
    bar, no charts (the tests that check charts draw them), a 5 s request timeout."""
    return [
        "--num-requests", str(requests), "--warmup", "0", "--no-progress", "--no-charts",
        "--request-timeout-seconds", "5",
    ]  # fmt: skip


__all__ = ["MODEL", "ServerFactory", "quick_run"]
