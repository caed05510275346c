"""The gate names each objective by the stack key a user sets: a real key, spelled as such."""

from __future__ import annotations

from bench.results.gate import evaluate
from serving.config.groups import SloSettings
from serving.config.settings import config_keys


def test_every_objective_is_named_by_a_real_config_key() -> None:
    slo = SloSettings.model_validate(
        {
            "sloP95TtftMs": 1,
            "sloP95E2EMs": 1,
            "sloMinSuccessRate": 1,
            "sloMinRequestsPerSecond": 1000,
        }
    )
    cell = {
        "id": "c1-p128-o16",
        "status": "ok",
        "concurrency": 1,
        "prompt_tokens": 128,
        "output_tokens": 16,
        "p95_ttft_ms": 5.0,
        "p95_e2el_ms": 5.0,
        "success_rate": 0.5,
        "request_throughput": 1.0,
    }
    result = evaluate([cell], slo)
    named = {check.slo for check in result.checks}
    assert named == {"sloP95TtftMs", "sloP95E2EMs", "sloMinSuccessRate", "sloMinRequestsPerSecond"}
    assert named <= set(config_keys())
    assert not result.passed
