"""/metrics parsing and speculative-decoding acceptance."""

from __future__ import annotations

import pytest

from endpoint.metrics import (
    MetricsParseError,
    SpecDecodeCounters,
    parse_metrics,
    spec_decode_acceptance,
)

LABELS = 'engine="0",model_name="m"'


def _text(drafts: float, draft_tokens: float, accepted: float, per_pos: list[float]) -> str:
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{LABELS}}} 3.0",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{LABELS}}} 1.0",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{LABELS}}} 0.25",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{LABELS}}} 1000.0",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{LABELS}}} 500.0",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        f'vllm:time_to_first_token_seconds_bucket{{{LABELS},le="0.1"}} 2.0',
        f'vllm:time_to_first_token_seconds_bucket{{{LABELS},le="+Inf"}} 4.0',
        f"vllm:time_to_first_token_seconds_count{{{LABELS}}} 4.0",
        f"vllm:time_to_first_token_seconds_sum{{{LABELS}}} 0.8",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{LABELS}}} {drafts}",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{LABELS}}} {draft_tokens}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{LABELS}}} {accepted}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LABELS},position="{i}"}} {v}'
        for i, v in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


def test_summary_fields() -> None:
    snap = parse_metrics(_text(10, 30, 12, [6, 4, 2]))
    assert snap.num_requests_running == 3
    assert snap.num_requests_waiting == 1
    assert snap.kv_cache_usage == 0.25
    assert snap.prompt_tokens_total == 1000
    assert snap.generation_tokens_total == 500
    assert snap.mean_ttft_s == pytest.approx(0.2)
    summary = snap.summary()
    assert summary["spec_decode"]["acceptance_rate"] == pytest.approx(12 / 30)
    assert summary["spec_decode"]["acceptance_by_position"] == pytest.approx([0.6, 0.4, 0.2])


def test_acceptance_from_deltas() -> None:
    before = parse_metrics(_text(10, 30, 12, [6, 4, 2]))
    after = parse_metrics(_text(30, 90, 42, [18, 14, 10]))
    acc = spec_decode_acceptance(before, after)
    assert acc is not None
    assert acc.num_drafts == 20
    assert acc.acceptance_rate == pytest.approx(30 / 60)
    assert acc.mean_acceptance_length == pytest.approx(1 + 30 / 20)
    assert acc.acceptance_by_position == pytest.approx((12 / 20, 10 / 20, 8 / 20))


def test_acceptance_none_without_spec_decode_or_drafts() -> None:
    counters = SpecDecodeCounters(5, 15, 3, (2, 1, 0))
    assert spec_decode_acceptance(counters, counters) is None
    plain = parse_metrics(
        f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{LABELS}}} 0\n"
    )
    assert plain.spec_decode is None
    assert spec_decode_acceptance(None, plain) is None


def test_legacy_gpu_cache_metric_is_accepted() -> None:
    snap = parse_metrics(
        f"# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{{{LABELS}}} 0.5\n"
    )
    assert snap.kv_cache_usage == 0.5


def test_sums_over_engines_and_filters_by_model() -> None:
    text = (
        "# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="a"} 10\n'
        'vllm:prompt_tokens_total{engine="1",model_name="a"} 5\n'
        'vllm:prompt_tokens_total{engine="0",model_name="b"} 100\n'
    )
    assert parse_metrics(text).prompt_tokens_total == 115
    assert parse_metrics(text, model_name="a").prompt_tokens_total == 15
    with pytest.raises(MetricsParseError, match="model_name='c'"):
        parse_metrics(text, model_name="c")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('vllm:num_requests_running{model_name="m" 1\nnot prometheus\n', "not Prometheus text"),
        ("# TYPE http_requests_total counter\nhttp_requests_total 3\n", "no vllm: metrics"),
    ],
)
def test_unusable_metrics_raise(text: str, reason: str) -> None:
    with pytest.raises(MetricsParseError, match=reason):
        parse_metrics(text)
