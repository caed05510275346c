"""engine-check's comparisons: metric names and labels, wire shapes, bench against server."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from enginecheck import agreement, metricnames, wire

FAMILIES = {
    "vllm:num_requests_waiting": {"kind": "gauge", "labels": ["engine", "model_name"]},
    "vllm:time_to_first_token_seconds": {"kind": "histogram", "labels": ["engine", "model_name"]},
    "vllm:spec_decode_num_drafts": {"kind": "counter", "labels": ["engine", "model_name"]},
}


def _exposition(labels: tuple[str, ...] = ("model_name", "engine")) -> str:
    registry = CollectorRegistry()
    Counter("vllm:spec_decode_num_drafts", "d", list(labels), registry=registry).labels(
        *["x"] * len(labels)
    ).inc()
    Histogram("vllm:time_to_first_token_seconds", "d", list(labels), registry=registry).labels(
        *["x"] * len(labels)
    ).observe(0.1)
    return generate_latest(registry).decode()


def test_names_are_found_in_any_deployed_document() -> None:
    doc = [
        {"inputs": {"query": "sum(rate(vllm:time_to_first_token_seconds_bucket[5m]))"}},
        {"inputs": {"metric": {"name": "vllm:num_requests_waiting"}}},
        {"text": "prometheus.googleapis.com/vllm_num_requests_waiting/gauge"},
    ]
    assert metricnames.used_names(doc) == {
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:num_requests_waiting",
    }


def test_a_used_name_the_server_lacks_fails_naming_it() -> None:
    used = {"vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_waiting"}
    problems = metricnames.problems(used, _exposition(), FAMILIES)
    assert problems == [
        "vllm:num_requests_waiting: used by this package, not in the real server's /metrics"
    ]
    # The documented fallback for an older vLLM is not expected.
    assert metricnames.problems({"vllm:gpu_cache_usage_perc"}, _exposition(), FAMILIES) == []


def test_missing_labels_fail_and_optional_families_may_be_absent() -> None:
    used = {"vllm:spec_decode_num_drafts_total"}
    problems = metricnames.problems(used, _exposition(("model_name",)), FAMILIES)
    assert len(problems) == 1 and "lack label(s) ['engine']" in problems[0]
    empty = generate_latest(CollectorRegistry()).decode()
    assert (
        metricnames.problems(used, empty, FAMILIES, optional={"vllm:spec_decode_num_drafts"}) == []
    )


REAL_STREAM = (
    'data: {"id":"c","choices":[{"index":0,"text":"a","finish_reason":null}],'
    '"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}\n\n'
    'data: {"id":"c","choices":[{"index":0,"text":"b","finish_reason":"length"}],'
    '"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n'
    'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,'
    '"total_tokens":5}}\n\n'
    "data: [DONE]\n\n"
)


def test_same_stream_shape_has_no_difference() -> None:
    real = wire.exchange("s", 200, "text/event-stream; charset=utf-8", REAL_STREAM)
    assert [k for k, _ in real.body] == ["content", "finish", "usage", "done"]
    assert wire.differences(real, real) == []


def test_a_drifting_fake_is_named_field_by_field() -> None:
    real = wire.exchange("s", 200, "text/event-stream", REAL_STREAM)
    fake_text = REAL_STREAM.replace('"finish_reason":null', '"finish_reason":null,"x":1').replace(
        'data: {"id":"c","choices":[],', 'data: {"choices":[],'
    )
    fake = wire.exchange("s", 200, "text/event-stream", fake_text.replace("data: [DONE]\n\n", ""))
    found = wire.differences(real, fake)
    assert "s: stream events ['content', 'finish', 'usage'] in the fake, " in found[0]
    assert any("$<content>.choices[].x: the fake sends it" in d for d in found)
    assert any("$<usage>.id: the real server sends it" in d for d in found)


def test_error_bodies_compare_type_param_and_code() -> None:
    body = {"error": {"message": "m", "type": "NotFoundError", "param": "model", "code": 404}}
    real = wire.exchange("e", 404, "application/json", json.dumps(body))
    body["error"]["code"] = "404"
    fake = wire.exchange("e", 404, "application/json", json.dumps(body))
    found = wire.differences(real, fake)
    assert found[0].startswith("e: error: {")
    assert any('$.error.code: "str" in the fake, "int" for real' in d for d in found)
    assert wire.differences(real, fake, ignore=("error", "$.error.code")) == []


def _cell(**kw: object) -> dict[str, object]:
    cell: dict[str, object] = {
        "id": "c1-p128-o32",
        "status": "ok",
        "prompt_tokens": 128,
        "median_prompt_tokens": 128,
        "client_limited": False,
        "client_mean_ttft_ms": 10.5,
        "server_mean_ttft_ms": 10.0,
        "client_mean_itl_ms": 4.1,
        "server_mean_itl_ms": 4.0,
        "spec_decode_acceptance_rate": 1.0,
        "spec_decode_acceptance_length": 4.0,
    }
    cell.update(kw)
    return cell


def test_a_cell_that_agrees_has_no_problem() -> None:
    assert agreement.cell_problems(_cell(), agreeing_drafter_tokens=3) == []
    assert "acceptance 100.0%" in agreement.cell_summary(_cell())


def test_disagreements_are_named() -> None:
    found = agreement.cell_problems(
        _cell(median_prompt_tokens=41, client_mean_ttft_ms=24.0, spec_decode_acceptance_rate=0.9),
        agreeing_drafter_tokens=3,
    )
    assert any("prompts of 41 tokens" in p for p in found)
    assert any("mean TTFT 24.00 ms by the client, 10.00 ms" in p for p in found)
    assert any("acceptance 90.00%" in p for p in found)


def test_a_client_limited_cell_is_not_judged_on_latency() -> None:
    cell = _cell(client_limited=True, client_mean_ttft_ms=40.0)
    assert agreement.cell_problems(cell) == []
    # Gaps under the bench's own 10 ms client-gap limit are not judged relatively.
    assert agreement.cell_problems(_cell(client_mean_itl_ms=9.0, server_mean_itl_ms=1.0)) == []


def test_a_fake_s_metric_with_other_labels_or_unknown_name_is_named() -> None:
    real = {"vllm:x_total": {"engine", "model_name"}, "vllm:y": {"engine", "model_name"}}
    fake = {"vllm:x_total": {"model_name"}, "vllm:z": set(), "python_info": set()}
    assert wire.metric_differences("fake", real, fake) == [
        "fake: vllm:x_total has labels ['model_name'], the real server's ['engine', 'model_name']",
        "fake: exports vllm:z, the real server does not",
    ]


def test_a_run_with_nothing_judged_fails() -> None:
    starved = [_cell(client_limited=True), _cell(id="c4", client_limited=True)]
    assert agreement.run_problems(starved) == [
        "every cell was client-limited or failed: no TTFT or ITL was compared"
    ]
    assert agreement.run_problems([*starved, _cell()]) == []
