"""Every tool over a real MCP stdio session: happy path, failure path, and the secrets planted in
the fakes never coming back."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from typing import Any

import httpx
import pytest

from mcp_server.server import MAX_RESULT_CHARS, _bounded_result
from tests.bench._cells import cell, write_run
from tests.mcp_server.conftest import API_KEY, PROJECT, ROOT, SECRETS, TPU_NODE, McpClient

READ_ONLY = {
    "list_stacks",
    "stack_endpoints",
    "service_status",
    "health_check",
    "model_details",
    "query_model",
    "metrics_summary",
    "capacity_plan",
    "benchmark_runs",
    "compare_benchmarks",
    "error_logs",
    "tpu_zones",
}
ACTIONS = {"run_benchmark_cell", "start_preview"}


def test_read_only_tools_listed_with_output_schemas_and_no_actions(client: McpClient) -> None:
    tools = {t.name: t for t in client.list_tools()}
    assert set(tools) == READ_ONLY
    for tool in tools.values():
        assert tool.outputSchema is not None, tool.name
        assert tool.annotations is not None and tool.annotations.readOnlyHint, tool.name
        assert tool.description
        # No tool takes a key, token or secret as an argument.
        for argument in tool.inputSchema.get("properties", {}):
            assert not any(
                w in argument.lower() for w in ("key", "token", "secret", "password")
            ) or (
                argument
                in (
                    "what_if_key",
                    "max_tokens",
                    "prompt_tokens",
                    "output_tokens",
                    "shared_prefix_tokens",
                )
            ), (
                tool.name,
                argument,
            )


def test_action_tools_only_when_enabled_and_say_what_they_do(action_client: McpClient) -> None:
    tools = {t.name: t for t in action_client.list_tools()}
    assert set(tools) == READ_ONLY | ACTIONS
    for name in ACTIONS:
        assert tools[name].description.startswith("ACTION (enabled with --enable-action")
    assert "sends a load" in tools["run_benchmark_cell"].description
    assert tools["run_benchmark_cell"].annotations.readOnlyHint is False


def test_calling_a_disabled_action_is_an_error(client: McpClient) -> None:
    assert "Unknown tool" in client.error("run_benchmark_cell", {"stack": "l4"})


# Stacks and endpoints ----------------------------------------------------------------------


def test_list_stacks_reads_stack_files_and_outputs(
    client: McpClient, world: dict[str, Any]
) -> None:
    stacks = {s["stack"]: s for s in client.ok("list_stacks")["stacks"]}
    assert set(stacks) == {"l4", "tpu-v6e1"}
    l4 = stacks["l4"]
    assert (l4["accelerator"], l4["platform"], l4["location"]) == (
        "nvidia-l4",
        "cloud-run",
        "us-east4",
    )
    assert l4["model"] == "google/gemma-4-12B-it-qat-w4a16-ct"
    assert l4["endpoints"] == [world["cloud_run"].url]
    tpu = stacks["tpu-v6e1"]
    assert (tpu["platform"], tpu["location"], tpu["accelerator"]) == ("tpu", "us-east5-b", "v6e-1")


def test_stack_endpoints(client: McpClient, world: dict[str, Any]) -> None:
    l4 = client.ok("stack_endpoints", {"stack": "l4"})
    assert l4["endpoints"][0]["url"] == world["cloud_run"].url
    assert l4["endpoints"][0]["auth"].startswith("Google ID token for")
    assert l4["service_name"] == "gemma-l4-vllm"
    tpu = client.ok("stack_endpoints", {"stack": "tpu-v6e1"})
    assert tpu["endpoints"][0]["auth"] == "vLLM API key from Secret Manager secret vllm-api-key"
    assert tpu["node_names"][0].endswith(f"{TPU_NODE}-node")


def test_unknown_stack_is_an_error_naming_the_allowed_ones(client: McpClient) -> None:
    message = client.error("stack_endpoints", {"stack": "h100"})
    assert "'h100' is not served here" in message and "l4, tpu-v6e1" in message


# Status ---------------------------------------------------------------------------------------


def test_status_cloud_run(client: McpClient, world: dict[str, Any]) -> None:
    status = client.ok("service_status", {"stack": "l4"})["cloud_run"]
    assert status["ready"] is True
    assert status["latest_ready_revision"] == "gemma-l4-vllm-00003-xyz"
    assert {c["type"] for c in status["conditions"]} == {
        "Ready",
        "ConfigurationsReady",
        "RoutesReady",
    }
    call = world["google"].calls("run.projects.locations.services.get")[-1]
    assert call.errors == []
    assert call.path == f"/v2/projects/{PROJECT}/locations/us-east4/services/gemma-l4-vllm"


def test_status_tpu_uses_flex_start_api_version(client: McpClient, world: dict[str, Any]) -> None:
    status = client.ok("service_status", {"stack": "tpu-v6e1"})["tpu"]
    assert status == [
        {
            "queued_resource": TPU_NODE,
            "zone": "us-east5-b",
            "found": True,
            "state": "ACTIVE",
            "state_initiator": "USER",
            "detail": None,
        }
    ]
    call = world["google"].calls("tpu.projects.locations.queuedResources.get")[-1]
    assert call.errors == [] and call.path.startswith("/v2alpha1/")


def test_status_tpu_failed_and_missing(client: McpClient, world: dict[str, Any]) -> None:
    resources = world["google"].queued_resources
    name = next(iter(resources))
    saved = resources[name]
    resources[name] = {
        "name": name,
        "state": {
            "state": "FAILED",
            "stateInitiator": "SERVICE",
            "failedData": {"error": {"code": 8, "message": "There is no more capacity in zone"}},
        },
    }
    try:
        failed = client.ok("service_status", {"stack": "tpu-v6e1"})["tpu"][0]
        del resources[name]
        missing = client.ok("service_status", {"stack": "tpu-v6e1"})["tpu"][0]
    finally:
        resources[name] = saved
    assert failed["state"] == "FAILED" and failed["detail"] == "There is no more capacity in zone"
    assert missing["found"] is False and "not deployed" in missing["detail"]


def test_status_failure_carries_googles_reason(client: McpClient, world: dict[str, Any]) -> None:
    google = world["google"]
    google.failures["run.projects.locations.services.get"] = (
        403,
        "PERMISSION_DENIED",
        "Permission 'run.services.get' denied on resource",
    )
    try:
        message = client.error("service_status", {"stack": "l4"})
    finally:
        del google.failures["run.projects.locations.services.get"]
    assert "HTTP 403 PERMISSION_DENIED: Permission 'run.services.get' denied" in message
    assert "application-default login" in message


# Health, model, query, metrics -------------------------------------------------------------


def test_health_check_structured_verdict_with_progress(client: McpClient) -> None:
    result = client.ok("health_check", {"stack": "l4", "deadline_seconds": 30})
    assert result["ok"] is True
    checks = result["endpoints"][0]["checks"]
    assert [c["name"] for c in checks] == ["readiness", "models", "chat", "metrics"]
    assert all(c["ok"] for c in checks)
    assert any(p[0] == "health_check" for p in client.progress)


def test_health_check_tpu_with_secret_manager_key(client: McpClient) -> None:
    result = client.ok("health_check", {"stack": "tpu-v6e1", "deadline_seconds": 30})
    assert result["ok"] is True, result


def test_health_check_tpu_secret_manager_refusal_is_a_verdict(
    client: McpClient, world: dict[str, Any]
) -> None:
    secrets = world["google"].secrets
    saved = dict(secrets)
    secrets.clear()
    try:
        result = client.ok("health_check", {"stack": "tpu-v6e1", "deadline_seconds": 10})
    finally:
        secrets.update(saved)
    assert result["ok"] is False
    readiness = result["endpoints"][0]["checks"][0]
    assert readiness["name"] == "readiness"
    assert "no credentials, request not sent" in readiness["detail"]
    assert "Secret Manager (HTTP 404)" in readiness["detail"]


def test_health_check_failure_is_a_verdict_not_an_error(
    client: McpClient, world: dict[str, Any]
) -> None:
    world["cloud_run"].config.empty_completion = True
    try:
        result = client.ok("health_check", {"stack": "l4", "deadline_seconds": 20})
    finally:
        world["cloud_run"].config.empty_completion = False
    assert result["ok"] is False
    chat = next(c for c in result["endpoints"][0]["checks"] if c["name"] == "chat")
    assert chat["ok"] is False and "empty completion" in chat["detail"]


def test_health_deadline_out_of_bounds(client: McpClient) -> None:
    message = client.error("health_check", {"stack": "l4", "deadline_seconds": 100000})
    assert "deadline_seconds" in message


def test_model_details(client: McpClient) -> None:
    details = client.ok("model_details", {"stack": "l4"})
    assert details["served"][0]["id"] == "google/gemma-4-12B-it-qat-w4a16-ct"
    configured = details["configured"]
    assert configured["max_model_len"] == 32768
    assert configured["quantization"] == "compressed-tensors"
    assert configured["kv_cache_dtype"] == "fp8"
    assert configured["speculative_config"] is None
    assert configured["vllm_args"][0] == "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
    assert configured["vllm_args_source"] == "stack output vllm_command_line"
    assert details["max_model_len_matches"] is True


def test_model_details_rendered_when_not_in_outputs(client: McpClient) -> None:
    details = client.ok("model_details", {"stack": "tpu-v6e1"})
    configured = details["configured"]
    assert configured["vllm_args_source"].startswith("rendered from the stack file")
    assert (
        "--port=8000" in configured["vllm_args"]
        and "--max-model-len=4096" in configured["vllm_args"]
    )
    assert configured["quantization"] is None


def test_model_details_endpoint_index_out_of_range(client: McpClient) -> None:
    message = client.error("model_details", {"stack": "tpu-v6e1", "endpoint_index": 3})
    assert "has 1 endpoint(s)" in message


def test_query(client: McpClient) -> None:
    result = client.ok("query_model", {"stack": "tpu-v6e1", "prompt": "Hello", "max_tokens": 8})
    assert result["completion_tokens"] == 8
    assert result["prompt_tokens"] > 0
    assert result["content"].startswith("tok")
    assert result["ttft_s"] is not None and result["latency_s"] >= result["ttft_s"]
    assert result["tokens_per_s"] > 0


def test_query_bounds(client: McpClient) -> None:
    assert "max_tokens" in client.error(
        "query_model", {"stack": "l4", "prompt": "Hi", "max_tokens": 100000}
    )
    assert "prompt" in client.error("query_model", {"stack": "l4", "prompt": "x" * 9000})


def test_query_server_error_is_reported(client: McpClient, world: dict[str, Any]) -> None:
    world["cloud_run"].config.fail_every = 1
    try:
        message = client.error("query_model", {"stack": "l4", "prompt": "Hi"})
    finally:
        world["cloud_run"].config.fail_every = 0
    assert "chat completion failed" in message and "HTTP 500" in message


def test_metrics_window_with_spec_decode_acceptance(
    client: McpClient, world: dict[str, Any]
) -> None:
    import threading
    import time

    tpu = world["tpu"]

    def scrapes() -> int:
        return sum(1 for r in list(tpu.requests) if r.path == "/metrics")

    before = scrapes()

    def load() -> None:  # a request lands inside the window: after its first scrape
        deadline = time.monotonic() + 30
        while scrapes() == before and time.monotonic() < deadline:
            time.sleep(0.01)
        # Straight to the fake (a few ms, even on a loaded machine), not through the MCP
        # server and Secret Manager: it must end inside the window's two seconds.
        httpx.post(
            tpu.url + "/v1/completions",
            json={"prompt": "Hi", "max_tokens": 8},
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=60,
        ).raise_for_status()

    thread = threading.Thread(target=load)
    thread.start()
    try:
        result = client.ok("metrics_summary", {"stack": "tpu-v6e1", "window_seconds": 2})
    finally:
        thread.join()
    assert result["speculative_decoding_on"] is True
    assert result["generation_tokens"] == 8
    spec = result["spec_decode"]
    assert spec is not None and len(spec["acceptance_by_position"]) == 3
    assert 0 < spec["acceptance_rate"] <= 1
    assert any(p[0] == "metrics_summary" for p in client.progress)


def test_metrics_malformed(client: McpClient, world: dict[str, Any]) -> None:
    world["cloud_run"].config.malformed_metrics = True
    try:
        message = client.error("metrics_summary", {"stack": "l4", "window_seconds": 1})
    finally:
        world["cloud_run"].config.malformed_metrics = False
    assert "malformed /metrics" in message


# Plan -------------------------------------------------------------------------------------------


def test_capacity_plan_and_cost(client: McpClient) -> None:
    plan = client.ok("capacity_plan", {"stack": "l4", "requests_per_second": 20})
    assert plan["fits"] is True
    assert plan["plan"]["max_model_len"] == 32768
    assert plan["plan"]["usd_per_million_requests"] > 0
    # The rate is the whole endpoint's, as `gemma4 plan -r`: the same figures.
    from serving.capacity.plan import load_stack_settings, report

    local = report("l4", load_stack_settings("l4"), 20)
    assert plan["plan"]["serving_replicas"] == local["serving_replicas"]
    assert plan["plan"]["usd_per_million_requests"] == local["usd_per_million_requests"]
    default = client.ok("capacity_plan", {"stack": "l4"})["plan"]
    assert (
        default["requests_per_second_source"]
        == report("l4", load_stack_settings("l4"))["requests_per_second_source"]
    )


def test_capacity_plan_takes_the_workload_and_targets_of_gemma4_plan(client: McpClient) -> None:
    """The same workload and percentile targets as `gemma4 plan -s l4 -r 0.5 --prompt-tokens
    1000 --output-tokens 200 --prompt-p95 2500 --ttft-p95-ms 3000`: the same answer."""
    from serving.capacity.configsearch import Target
    from serving.capacity.perf import Workload
    from serving.capacity.plan import load_stack_settings, report
    from serving.capacity.simulate import Traffic

    ask = {"prompt_tokens": 1000, "output_tokens": 200, "prompt_p95": 2500}
    plan = client.ok(
        "capacity_plan",
        {"stack": "l4", "requests_per_second": 0.5, **ask, "targets": {"ttft_p95_ms": 3000}},
    )["plan"]
    local = report(
        "l4",
        load_stack_settings("l4"),
        0.5,
        Workload(1000, 200),
        targets=(Target("ttft", "p95", 3000),),
        traffic=Traffic(0.5, 1000, 200, prompt_p95=2500),
    )
    assert plan["answer"]["replicas"] == local["answer"]["replicas"]
    assert plan["answer"]["latency_ms"] == local["answer"]["latency_ms"]
    assert plan["replicas"]["slo"] == "TTFT p95 <= 3000 ms"
    bad = client.error("capacity_plan", {"stack": "l4", "targets": {"ttft_p97_ms": 9}})
    assert "unknown key 'ttft_p97_ms'" in bad and "ttft_p95_ms" in bad


def test_capacity_plan_what_if_list_value(client: McpClient) -> None:
    plan = client.ok(
        "capacity_plan",
        {"stack": "l4", "what_if_key": "benchmarkConcurrency", "what_if_value": [1, 4]},
    )
    assert plan["what_if"] == "benchmarkConcurrency=[1, 4]" and plan["changes"] == {}


def test_capacity_plan_what_if(client: McpClient) -> None:
    plan = client.ok(
        "capacity_plan",
        {"stack": "l4", "what_if_key": "gpuMemoryUtilization", "what_if_value": 0.8},
    )
    assert plan["what_if"] == "gpuMemoryUtilization=0.8"
    assert plan["changes"]["kv_tokens"]["after"] < plan["changes"]["kv_tokens"]["before"]


def test_capacity_plan_an_unknown_price_is_null_never_zero(client: McpClient) -> None:
    """A TPU node on spot: no source quotes a v6e spot rate, so every cost built from it is
    null with price_status unknown (it was a number before the change)."""
    plan = client.ok(
        "capacity_plan",
        {"stack": "tpu-v6e1", "what_if_key": "provisioning", "what_if_value": "spot"},
    )
    after = plan["plan"]
    assert after["price_status"] == after["price_status_at_rate"] == "unknown"
    for key in ("usd_per_hour", "usd_per_month_billed", "usd_per_million_output_tokens"):
        assert after[key] is None and plan["changes"][key]["before"] > 0, key
    assert all(p["usd_per_million_output_tokens"] is None for p in after["performance"]["curve"])


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("maxModelLen", 999999, "exceeds google/gemma-4-12B-it-qat-w4a16-ct's context"),
        ("maxNumSeqs", "__import__('os')", "maxNumSeqs"),
        ("noSuchKey", 1, "unknown config key(s): 'noSuchKey'"),
        ("kvCacheDtype", "int4", "kvCacheDtype"),
        ("benchmarkConcurrency", [1, 0], "concurrency levels must be at least 1"),
    ],
)
def test_capacity_plan_what_if_rejected_by_settings(
    client: McpClient, key: str, value: Any, expected: str
) -> None:
    message = client.error(
        "capacity_plan", {"stack": "l4", "what_if_key": key, "what_if_value": value}
    )
    assert expected in message


# Benchmarks ----------------------------------------------------------------------------------


def test_benchmark_runs_and_compare(client: McpClient) -> None:
    runs = client.ok("benchmark_runs", {"stack": "l4"})
    ids = [r["run"] for r in runs["runs"]]
    assert ids[:2] == ["l4/20261121T100000Z", "l4/20261120T100000Z"] or set(ids) >= {
        "l4/20261121T100000Z",
        "l4/20261120T100000Z",
    }
    assert any("not-a-run" in p for p in runs["problems"])
    comparison = client.ok(
        "compare_benchmarks", {"baseline": "l4/20261120T100000Z", "other": "l4/20261121T100000Z"}
    )
    assert comparison["comparison"]["baseline"] == "baseline"
    assert "tuned" in comparison["markdown"]
    assert "'h100' is not served here" in client.error("benchmark_runs", {"stack": "h100"})


@pytest.mark.parametrize("run", ["l4/../../../etc", "l4/missing", "nope/x", "l4"])
def test_compare_refuses_unknown_or_escaping_runs(client: McpClient, run: str) -> None:
    message = client.error("compare_benchmarks", {"baseline": run, "other": "l4/20261120T100000Z"})
    assert run in message or "not a benchmark run" in message


# Logs --------------------------------------------------------------------------------------


def test_error_logs_filtered_bounded_redacted(client: McpClient, world: dict[str, Any]) -> None:
    result = client.ok("error_logs", {"stack": "l4", "hours": 2, "limit": 5})
    assert 'resource.labels.service_name="gemma-l4-vllm"' in result["filter"]
    assert "severity>=ERROR" in result["filter"]
    first, second = result["entries"]
    assert "[REDACTED]" in first["text"] and "401 Unauthorized" in first["text"]
    assert second["truncated"] is True and len(second["text"]) == 2000
    call = world["google"].calls("logging.entries.list")[-1]
    assert call.errors == []
    assert call.body["pageSize"] == 5 and call.body["resourceNames"] == [f"projects/{PROJECT}"]


def test_error_logs_tpu_filter_names_the_nodes(client: McpClient) -> None:
    result = client.ok("error_logs", {"stack": "tpu-v6e1", "limit": 1})
    assert f'"{TPU_NODE}-node"' in result["filter"] and "tpu_worker" in result["filter"]
    assert len(result["entries"]) == 1


def test_error_logs_bad_filter_answer(client: McpClient, world: dict[str, Any]) -> None:
    google = world["google"]
    google.failures["logging.entries.list"] = (400, "INVALID_ARGUMENT", "Unparseable filter")
    try:
        message = client.error("error_logs", {"stack": "l4"})
    finally:
        del google.failures["logging.entries.list"]
    assert "Unparseable filter" in message


# TPU zones ---------------------------------------------------------------------------------------


def test_tpu_zones(client: McpClient) -> None:
    result = client.ok("tpu_zones", {"stack": "tpu-v6e1"})
    assert [z["zone"] for z in result["zones"]] == ["europe-west4-a", "us-east5-b"]
    assert result["zones"][0]["topology"] == ["1x1"]
    assert result["locations_checked"] == 3
    assert "quota" not in result and "quota" in result["quota_note"]


def test_tpu_zones_refuses_a_cloud_run_stack(client: McpClient) -> None:
    assert "not a TPU" in client.error("tpu_zones", {"stack": "l4"})


# Actions -----------------------------------------------------------------------------------------


def test_benchmark_cell(action_client: McpClient, world: dict[str, Any]) -> None:
    result = action_client.ok(
        "run_benchmark_cell",
        {
            "stack": "l4",
            "concurrency": 2,
            "prompt_tokens": 32,
            "output_tokens": 4,
            "budget_seconds": 10,
        },
    )
    assert result["cell"]["status"] == "ok" and result["cell"]["completed"] >= 8
    assert (world["root"] / "bench-results" / result["run"] / "run.json").is_file()
    assert any(p[0] == "run_benchmark_cell" for p in action_client.progress)


def test_benchmark_cell_skipped_when_too_long(action_client: McpClient) -> None:
    message = action_client.error(
        "run_benchmark_cell",
        {"stack": "tpu-v6e1", "prompt_tokens": 8000, "output_tokens": 16, "budget_seconds": 10},
    )
    assert "exceed max_model_len 4096" in message


def test_preview_calls_the_preview_package(action_client: McpClient, world: dict[str, Any]) -> None:
    preview = action_client.ok("start_preview", {"stack": "l4"})["preview"]
    assert preview["resources"] == 7
    # The preview was given the stack file; the result names it relative to the project.
    assert preview["stack_file"] == "Pulumi.l4.yaml"
    assert preview["note"] == "hf=[REDACTED]"


def test_preview_failure_is_reported(action_client: McpClient) -> None:
    message = action_client.error("start_preview", {"stack": "tpu-v6e1"})
    assert "preview of stack 'tpu-v6e1' failed: config key 'zone' is required" in message


# Secrets ---------------------------------------------------------------------------------


#: A call of every tool that reads a deployment or talks to its servers, whatever else ran
#: before in this worker (pytest-xdist spreads a module's tests over its workers).
EVERY_READING_TOOL = (
    ("stack_endpoints", {"stack": "l4"}),
    ("stack_endpoints", {"stack": "tpu-v6e1"}),
    ("service_status", {"stack": "l4"}),
    ("service_status", {"stack": "tpu-v6e1"}),
    ("health_check", {"stack": "l4", "deadline_seconds": 30}),
    ("health_check", {"stack": "tpu-v6e1", "deadline_seconds": 30}),
    ("model_details", {"stack": "l4"}),
    ("model_details", {"stack": "tpu-v6e1"}),
    ("query_model", {"stack": "tpu-v6e1", "prompt": "Hello", "max_tokens": 8}),
    ("metrics_summary", {"stack": "tpu-v6e1", "window_seconds": 1}),
    ("error_logs", {"stack": "l4"}),
    ("capacity_plan", {"stack": "l4"}),
    ("benchmark_runs", {"stack": "l4"}),
)


def test_no_planted_secret_in_any_output(client: McpClient, action_client: McpClient) -> None:
    for name, arguments in EVERY_READING_TOOL:
        client.call(name, arguments)
    action_client.call("start_preview", {"stack": "l4"})
    texts = client.outputs + action_client.outputs
    assert len(texts) >= len(EVERY_READING_TOOL) + 1
    for secret in SECRETS:
        for text in texts:
            assert secret not in text, (secret, text[:300])
    progress = json.dumps(client.progress + action_client.progress)
    for secret in SECRETS:
        assert secret not in progress


def test_a_run_id_error_names_the_real_tool(client: McpClient) -> None:
    message = client.error("compare_benchmarks", {"baseline": "x", "other": "y"})
    assert "`run` of benchmark_runs" in message


def test_huge_run_strings_are_capped_and_paths_are_relative(
    client: McpClient, world: dict[str, Any]
) -> None:
    results = world["root"] / "bench-results" / "l4"
    huge = results / "20261122T100000Z"
    write_run(huge, [cell(1, 512)], label="L" * 900_000, hardware="H" * 100_000)
    # A run.json over the 1 MiB cap is named as a problem, not read.
    heavy = results / "20261122T110000Z"
    write_run(heavy, [cell(1, 512)], label="L" * 2_000_000, hardware="l4")
    try:
        runs = client.call("benchmark_runs", {"stack": "l4"})
        text = "".join(getattr(c, "text", "") for c in runs.content)
        assert len(text) < 100_000
        listed = {r["run"]: r for r in (runs.structuredContent or {})["runs"]}
        assert listed["l4/20261122T100000Z"]["label"].endswith("[truncated]")
        problems = " ".join((runs.structuredContent or {})["problems"])
        assert "not-a-run" in problems and str(world["root"]) not in problems
        assert "20261122T110000Z/run.json is" in problems and "over the cap" in problems
        assert "l4/20261122T110000Z" not in listed
        compare = client.call(
            "compare_benchmarks",
            {"baseline": "l4/20261122T100000Z", "other": "l4/20261120T100000Z"},
        )
        assert not compare.isError
        assert len("".join(getattr(c, "text", "") for c in compare.content)) < 300_000
        message = client.error(
            "compare_benchmarks", {"baseline": "l4/not-a-run", "other": "l4/20261120T100000Z"}
        )
        assert "not a benchmark run" in message and str(world["root"]) not in message
    finally:
        shutil.rmtree(huge)
        shutil.rmtree(heavy)


def test_an_oversized_result_is_cut_with_a_note() -> None:
    data = {"items": ["x" * 100_000 for _ in range(10)], "n": 3}
    cut = _bounded_result(data)
    assert len(json.dumps(cut)) <= MAX_RESULT_CHARS and cut["n"] == 3
    assert all(s.endswith("characters]") and "truncated" in s for s in cut["items"])
    assert _bounded_result({"a": "short"}) == {"a": "short"}


def _cell_folders(world: dict[str, Any]) -> set[str]:
    return {p.name for p in (world["root"] / "bench-results" / "l4").glob("*-mcp-cell-*")}


def test_benchmark_cell_failed_reports_problems_and_samples(
    action_client: McpClient, world: dict[str, Any]
) -> None:
    server = world["cloud_run"]
    before = _cell_folders(world)
    server.config = dataclasses.replace(server.config, fail_every=2, fail_status=500)
    server._generate_calls = 0  # the preflight is call 1 (succeeds), then every other fails
    try:
        message = action_client.error(
            "run_benchmark_cell",
            {
                "stack": "l4",
                "concurrency": 1,
                "prompt_tokens": 16,
                "output_tokens": 2,
                "budget_seconds": 10,
            },
        )
    finally:
        server.config = dataclasses.replace(server.config, fail_every=0)
    assert "cell failed: success rate 50.0%" in message and "None" not in message
    assert "HTTP 500" in message and "injected failure" in message
    (new,) = _cell_folders(world) - before
    assert f"(run l4/{new})" in message
    assert str(world["root"]) not in message


def test_benchmark_cell_preflight_failure_leaves_no_folder(
    action_client: McpClient, world: dict[str, Any]
) -> None:
    server = world["cloud_run"]
    before = _cell_folders(world)
    server.config = dataclasses.replace(server.config, fail_every=1, fail_status=500)
    try:
        message = action_client.error(
            "run_benchmark_cell",
            {
                "stack": "l4",
                "concurrency": 1,
                "prompt_tokens": 16,
                "output_tokens": 2,
                "budget_seconds": 10,
            },
        )
    finally:
        server.config = dataclasses.replace(server.config, fail_every=0)
    assert "preflight failed" in message and "HTTP 500" in message
    assert _cell_folders(world) == before


def test_benchmark_cell_skipped_leaves_no_folder(
    action_client: McpClient, world: dict[str, Any]
) -> None:
    results = world["root"] / "bench-results" / "tpu-v6e1"
    before = set(results.glob("*")) if results.exists() else set()
    message = action_client.error(
        "run_benchmark_cell",
        {"stack": "tpu-v6e1", "prompt_tokens": 8000, "output_tokens": 16, "budget_seconds": 10},
    )
    assert "cell skipped: prompt 8000" in message
    after = set(results.glob("*")) if results.exists() else set()
    assert after == before


# The documentation's example session -------------------------------------------------------

_DOC_CALL = re.compile(r"^\s+gemma4-vllm/(\w+) (\{.*\})\s*$")
_DOC_PAIR = re.compile(r'"(\w+)": ("[^"]*"|true|false|null|-?\d+(?:\.\d+)?)')


def _doc_examples() -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, the answer shown) of each call in docs/mcp.md's example session."""
    lines = (ROOT / "docs" / "mcp.md").read_text().split("## Example session", 1)[1].splitlines()
    examples = []
    for i, line in enumerate(lines):
        match = _DOC_CALL.match(line)
        if not match:
            continue
        indent = len(line) - len(line.lstrip())
        answer = []
        for after in lines[i + 1 :]:
            if not after.strip() or len(after) - len(after.lstrip()) <= indent:
                break
            answer.append(after.strip())
        examples.append((match[1], json.loads(match[2]), " ".join(answer)))
    return examples


def _pairs(value: Any) -> set[tuple[str, str]]:
    if isinstance(value, dict):
        found = {(k, json.dumps(v)) for k, v in value.items() if not isinstance(v, dict | list)}
        for v in value.values():
            found |= _pairs(v)
        return found
    if isinstance(value, list):
        return set().union(*(_pairs(v) for v in value)) if value else set()
    return set()


def test_the_docs_show_a_call_of_every_kind() -> None:
    examples = _doc_examples()
    assert {tool for tool, _, _ in examples} >= {"service_status", "health_check", "capacity_plan"}
    assert any(answer.startswith("error:") for _, _, answer in examples)


@pytest.mark.parametrize(
    ("tool", "arguments", "answer"),
    _doc_examples(),
    ids=lambda value: value if isinstance(value, str) and len(value) < 20 else None,
)
def test_every_docs_example_runs(
    client: McpClient, tool: str, arguments: dict[str, Any], answer: str
) -> None:
    """Each call docs/mcp.md shows is answered as shown: an error with its first line, or a
    result holding every value the page prints."""
    if answer.startswith("error:"):
        first = answer.removeprefix("error:").split(" config key", 1)[0].strip()
        assert first in client.error(tool, arguments)
        return
    shown = {(key, json.dumps(json.loads(value))) for key, value in _DOC_PAIR.findall(answer)}
    assert shown, answer
    missing = shown - _pairs(client.ok(tool, arguments))
    assert not missing, f"docs/mcp.md shows {sorted(missing)} that {tool} does not answer"
