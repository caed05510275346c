"""What each MCP tool does: thin calls into the health checks, benchmark, planner and settings,
plus read-only Google API calls. Every function raises :class:`ToolFailure` with the reason
when it cannot answer; the server turns that into an MCP tool error."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import shlex
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.load.sweep import Grid, PreflightError, SweepOptions, run_sweep_async
from bench.reports.compare import compare_runs
from bench.results.store import RunData, StoreError, load_run
from components.tpu_api import TpuApi, TpuApiError
from components.tpu_queued_resource import api_version
from endpoint.auth import AuthError
from endpoint.client import make_client, request_capped
from endpoint.errors import status_line
from endpoint.limits import MAX_ECHO_CHARS
from endpoint.metrics import (
    MetricsParseError,
    MetricsSnapshot,
    fetch_metrics,
    spec_decode_acceptance,
)
from healthchecks.checks import Backoff, check_chat
from healthchecks.runner import run_health_checks
from serving.capacity.plan import PlanError, report
from serving.catalog.hardware import Platform
from serving.config.settings import Settings
from serving.render.gke import POOL_LABELS as GKE_POOL_LABELS
from serving.render.gke import VLLM_NAME as GKE_VLLM_NAME
from serving.render.vllm import CLOUD_RUN_PORT, render, speculative_config
from serving.render.vllm import parse_args as parse_vllm_args

from . import _deployments as d
from . import models
from ._redaction import redact_cut, redact_text
from .google_apis import GoogleApiError, GoogleApis, segment

Progress = Callable[[float, float | None, str], Awaitable[None]]
"""(progress, total, message): sends an MCP progress notification."""

LIMITS = {
    "prompt_chars": 8000,
    "max_tokens": 1024,
    "health_deadline_s": 900,
    "metrics_window_s": 300,
    "log_entries": 100,
    "log_hours": 168,
    "log_text_chars": 2000,
    "bench_runs": 50,
    "bench_budget_s": 600,
    "bench_concurrency": 64,
    "bench_prompt_tokens": 16384,
    "bench_output_tokens": 1024,
}
"""The bounds every tool enforces on its inputs and outputs."""

DEADLINES_S: dict[str, float] = {
    "list_stacks": 180,
    "stack_endpoints": 60,
    "service_status": 60,
    "model_details": 60,
    "query_model": 180,
    "capacity_plan": 30,
    "benchmark_runs": 60,
    "compare_benchmarks": 60,
    "error_logs": 60,
    "tpu_zones": 120,
    "start_preview": 300,
}
"""Each tool's overall deadline in seconds (stated in its description); the tools whose
duration the caller chooses add a margin to it:"""
HEALTH_MARGIN_S = 30.0
"""health_check: deadline_seconds + this (every endpoint shares the one deadline)."""
METRICS_MARGIN_S = 60.0
"""metrics_summary: window_seconds + this (the two scrapes)."""
BENCH_MARGIN_S = 300.0
"""run_benchmark_cell: budget_seconds + this (the readiness wait and the last requests)."""


@dataclass(frozen=True)
class WorkloadAsk:
    """The capacity tool's workload and targets, as `gemma4 plan` takes them."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    prompt_p95: int | None = None
    output_p95: int | None = None
    burstiness: float = 1.0
    targets: dict[str, float] = field(default_factory=dict)
    shared_prefix_tokens: int = 0

    def arguments(self, settings: Any, rate: float | None) -> dict[str, Any]:
        """report()'s workload, traffic and targets; ToolFailure naming a bad one."""
        from serving.capacity.configsearch import METRICS, STATS, Target
        from serving.capacity.perf import Workload
        from serving.capacity.simulate import Traffic

        known = {
            f"{m}_ms" if q == "mean" else f"{m}_{q}_ms": (m, q) for m in METRICS for q in STATS
        }
        targets = []
        for key, ms in sorted(self.targets.items()):
            if key not in known:
                raise ToolFailure(f"targets: unknown key {key[:40]!r}; allowed: {', '.join(known)}")
            try:
                targets.append(Target(*known[key], float(ms)))
            except ValueError as exc:
                raise ToolFailure(f"targets: {key}: {exc}") from None
        b = settings.benchmark
        prompt = self.prompt_tokens or b.benchmark_prompt_tokens
        output = self.output_tokens or b.benchmark_output_tokens
        try:
            traffic = Traffic(
                rate or 1.0,
                prompt,
                output,
                prompt_p95=self.prompt_p95,
                output_p95=self.output_p95,
                burstiness=self.burstiness,
                shared_prefix_tokens=self.shared_prefix_tokens,
            )
        except ValueError as exc:
            raise ToolFailure(str(exc)) from None
        return {
            "workload": Workload(prompt, output),
            "targets": tuple(targets),
            "traffic": traffic,
        }


class ToolFailure(Exception):
    """A tool could not answer; the message says why. The server tells it, and the errors of
    the modules the tools call (:data:`FAILURES`), as an MCP tool error."""


FAILURES: tuple[type[Exception], ...] = (
    ToolFailure,
    d.DeploymentError,
    GoogleApiError,
    TpuApiError,
    StoreError,
)
"""The errors whose message is the tool's answer (redacted, then cut)."""


def _last_segment(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


def platform_of(settings: Settings) -> str:
    """Where a stack runs, as every tool names it: ``cloud-run``, ``tpu`` (a TPU VM) or
    ``gke``; from the stack's ``platform`` key (its hardware's own platform by default), never
    from its accelerator alone (``gke-tpu-v6e`` is a GKE stack with TPU nodes)."""
    platform = settings.deploy_platform
    return {"cloud-run": "cloud-run", "tpu-vm": "tpu", "gke": "gke"}[platform]


_MCP_HINTS = (
    (
        "or pass --url and --model instead of -s",
        "or start the MCP server with --outputs-dir DIR holding each stack's saved "
        "`pulumi stack output --json` as DIR/<stack>.json",
    ),
    (" (or pass --url and --model)", ""),
    (
        "(pass --model with one of them)",
        "(the stack's served_model_name output or servedModelName key names another model)",
    ),
    (
        "pass --impersonate-service-account SA",
        "start the MCP server with --impersonate-service-account SA",
    ),
    (
        "pass --api-key-env VLLM_API_KEY",
        "start the MCP server with --api-key-env VLLM_API_KEY",
    ),
)
"""What the shared modules tell a command-line user, and what this server's caller can do
instead (tools take a stack, never --url or --model)."""


class Tools:
    """The tools of one server: its stacks and its Google API client."""

    def __init__(self, deployments: d.Deployments, apis: GoogleApis) -> None:
        self.deployments = deployments
        self.apis = apis

    def _deployed(self, stack: str, key: str) -> str:
        """The name in the stack output ``key`` (a service or a cluster), last segment only."""
        value = self.deployments.outputs(stack).get(key)
        if not isinstance(value, str) or not value:
            raise ToolFailure(
                f"stack {stack!r} has no {key} output; has it been deployed? "
                f"(`pulumi up -s {stack}`)"
            )
        return _last_segment(value)

    def list_stacks(self) -> models.StacksResult:
        stacks = []
        problems = []
        for stack in self.deployments.stacks:
            try:
                s = self.deployments.settings(stack)
            except d.DeploymentError as exc:
                problems.append(str(exc))
                continue
            endpoints: list[str] = []
            error: str | None = None
            try:
                outputs = self.deployments.outputs(stack)
                url = outputs.get("service_url")
                urls = outputs.get("endpoint_urls")
                endpoints = [url] if isinstance(url, str) and url else []
                if isinstance(urls, list):
                    endpoints += [u for u in urls if isinstance(u, str)]
            except d.DeploymentError as exc:
                error = str(exc)
            stacks.append(
                models.StackSummary(
                    stack=stack,
                    hardware=s.hardware,
                    accelerator=s.profile.accelerator,
                    platform=platform_of(s),
                    location=s.tpu.zone if platform_of(s) == "tpu" else s.region,
                    model=s.model.model,
                    served_model_name=s.model.served_name,
                    speculative_method=s.model.speculative_method,
                    num_speculative_tokens=(
                        s.model.num_speculative_tokens
                        if s.model.speculative_method != "none"
                        else None
                    ),
                    endpoints=endpoints,
                    outputs_error=error,
                )
            )
        return models.StacksResult(stacks=stacks, problems=problems)

    def stack_endpoints(self, stack: str) -> models.StackEndpoints:
        outputs = self.deployments.outputs(stack)
        targets = self.deployments.targets(stack)
        names = outputs.get("node_names")
        return models.StackEndpoints(
            stack=stack,
            served_model_name=targets[0].served_model_name,
            endpoints=[models.EndpointInfo(url=t.url, auth=t.auth.description) for t in targets],
            service_name=str(outputs["service_name"]) if outputs.get("service_name") else None,
            node_names=[str(n) for n in names] if isinstance(names, list) else [],
            image_ref=str(outputs["image_ref"]) if outputs.get("image_ref") else None,
        )

    # Status (Cloud Run Admin API, TPU API) ---------------------------------------------------

    async def status(self, stack: str) -> models.StatusResult:
        settings = self.deployments.settings(stack)
        project = self.deployments.project(stack)
        platform = platform_of(settings)
        if platform == "gke":
            return models.StatusResult(
                stack=stack, platform="gke", gke=await self._gke_status(stack, settings, project)
            )
        if platform == "tpu":
            return models.StatusResult(
                stack=stack, platform="tpu", tpu=await self._tpu_status(stack, settings, project)
            )
        service = self._deployed(stack, "service_name")
        region = settings.region
        body = await self.apis.get_service(project, region, service)
        conditions = [
            models.Condition(
                type=str(c.get("type", "")),
                state=c.get("state"),
                reason=c.get("reason") or c.get("revisionReason") or c.get("executionReason"),
                message=c.get("message"),
                last_transition_time=c.get("lastTransitionTime"),
            )
            for c in [body.get("terminalCondition") or {}, *(body.get("conditions") or [])]
            if isinstance(c, dict) and c.get("type")
        ]
        ready = next((c for c in conditions if c.type == "Ready"), None)
        return models.StatusResult(
            stack=stack,
            platform="cloud-run",
            cloud_run=models.CloudRunStatus(
                service=service,
                region=region,
                uri=body.get("uri"),
                ready=None if ready is None else ready.state == "CONDITION_SUCCEEDED",
                latest_ready_revision=_segment_or_none(body.get("latestReadyRevision")),
                latest_created_revision=_segment_or_none(body.get("latestCreatedRevision")),
                reconciling=body.get("reconciling"),
                conditions=conditions,
            ),
        )

    async def _gke_status(self, stack: str, settings: Settings, project: str) -> models.GkeStatus:
        """The vLLM replicas on GKE: the Deployment's and the autoscaler's counts and each Pod's
        state, read from the cluster's Kubernetes API (read-only GETs)."""
        outputs = self.deployments.outputs(stack)
        cluster_name = self._deployed(stack, "cluster_name")
        location = settings.region
        namespace = segment(
            outputs.get("namespace") or settings.gke.namespace, "the namespace output"
        )
        base = f"/namespaces/{namespace}"
        cluster = await self.apis.get_cluster(project, location, cluster_name)
        deployment = await self.apis.kubernetes_get(
            cluster, f"/apis/apps/v1{base}/deployments/{GKE_VLLM_NAME}"
        )
        hpa = await self.apis.kubernetes_get(
            cluster, f"/apis/autoscaling/v2{base}/horizontalpodautoscalers/{GKE_VLLM_NAME}"
        )
        selector = ",".join(f"{k}={v}" for k, v in sorted(GKE_POOL_LABELS.items()))
        pods = await self.apis.kubernetes_get(
            cluster, f"/api/v1{base}/pods", params={"labelSelector": selector, "limit": 100}
        )
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        hpa_spec, hpa_status = hpa.get("spec") or {}, hpa.get("status") or {}
        return models.GkeStatus(
            cluster=cluster_name,
            location=location,
            namespace=namespace,
            cluster_status=cluster.get("status"),
            desired_replicas=_int_or_none(spec.get("replicas")),
            ready_replicas=_int_or_none(status.get("readyReplicas")) or 0,
            updated_replicas=_int_or_none(status.get("updatedReplicas")) or 0,
            autoscaler_min=_int_or_none(hpa_spec.get("minReplicas")),
            autoscaler_max=_int_or_none(hpa_spec.get("maxReplicas")),
            autoscaler_desired=_int_or_none(hpa_status.get("desiredReplicas")),
            replicas=[_replica(p) for p in (pods.get("items") or [])[:100] if isinstance(p, dict)],
        )

    async def _tpu_status(
        self, stack: str, settings: Settings, project: str
    ) -> list[models.QueuedResourceStatus]:
        version = api_version({"provisioning": settings.tpu.provisioning})
        try:
            outputs = self.deployments.outputs(stack)
        except d.DeploymentError:
            outputs = {}
        # Ids from the stack outputs go into URLs that carry the token: checked first.
        zone = segment(settings.tpu.zone, "zone")
        ids = [
            segment(qr_id, "a queued-resource id from the node_names output")
            for qr_id in d.queued_resource_ids(stack, outputs, settings)
        ]
        segment(project, "project")
        tokens = self.apis.token_source()
        api = TpuApi(tokens, self.apis.urls.tpu, version)
        out = []
        try:
            for qr_id in ids:
                body = await asyncio.to_thread(api.get_queued_resource, project, zone, qr_id)
                state = (body or {}).get("state") or {}
                out.append(
                    models.QueuedResourceStatus(
                        queued_resource=qr_id,
                        zone=zone,
                        found=body is not None,
                        state=state.get("state"),
                        state_initiator=state.get("stateInitiator"),
                        detail=_failure_detail(state)
                        if body is not None
                        else "no such queued resource (not deployed, or deleted)",
                    )
                )
        finally:
            api.close()
        return out

    # Health, model, query, metrics (the endpoint) --------------------------------------------

    async def health(
        self, stack: str, deadline_seconds: float, progress: Progress
    ) -> models.HealthResult:
        targets = self.deployments.targets(stack)
        started = time.monotonic()
        pending: set[asyncio.Future[None]] = set()

        def on_line(line: str) -> None:
            # Called from the checks on this event loop: send the notification soon after.
            elapsed = time.monotonic() - started
            pending.add(
                asyncio.ensure_future(
                    progress(min(elapsed, deadline_seconds), deadline_seconds, line)
                )
            )

        reports = []
        for target in targets:
            await progress(time.monotonic() - started, deadline_seconds, f"checking {target.url}")
            reports.append(
                await run_health_checks(
                    target.url,
                    target.served_model_name,
                    auth=target.auth,
                    deadline_s=max(1.0, deadline_seconds - (time.monotonic() - started)),
                    request_timeout_s=min(120.0, deadline_seconds),
                    backoff=Backoff(initial_s=1.0, max_s=10.0),
                    progress=on_line,
                )
            )
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return models.HealthResult(
            stack=stack,
            ok=all(r.ok for r in reports),
            endpoints=[
                models.EndpointHealth(
                    url=r.url,
                    served_model_name=r.served_model_name,
                    auth=r.auth,
                    ok=r.ok,
                    checks=list(r.results),
                )
                for r in reports
            ],
        )

    async def model_details(self, stack: str, endpoint_index: int) -> models.ModelDetails:
        settings = self.deployments.settings(stack)
        target = self.deployments.target(stack, endpoint_index)
        async with make_client(target.url, auth=target.auth, timeout_s=30) as client:
            try:
                response = await request_capped(client, "GET", "/v1/models")
            except AuthError as exc:
                raise ToolFailure(f"no credentials, request not sent: {exc}") from None
            except Exception as exc:
                raise ToolFailure(f"{target.url}/v1/models: {type(exc).__name__}: {exc}") from None
        if response.status != 200:
            raise ToolFailure(
                f"{target.url}/v1/models answered {status_line(response.status, response.text)}"
            )
        try:
            cards = response.json()["data"]
            served = [
                models.ServedModel(
                    id=str(c["id"]),
                    max_model_len=c.get("max_model_len"),
                    owned_by=c.get("owned_by"),
                    root=c.get("root"),
                )
                for c in cards[:50]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise ToolFailure(f"/v1/models returned an unexpected body ({exc})") from None
        args, source = self._vllm_args(stack, settings)
        quantization = parse_vllm_args(args).get("quantization")
        mine = next((m for m in served if m.id == target.served_model_name), None)
        return models.ModelDetails(
            stack=stack,
            url=target.url,
            served=served,
            configured=models.ConfiguredModel(
                model=settings.model.model,
                served_model_name=settings.model.served_name,
                max_model_len=settings.vllm.max_model_len,
                quantization=quantization,
                dtype=settings.vllm.dtype,
                kv_cache_dtype=settings.vllm.kv_cache_dtype,
                speculative_config=speculative_config(settings, None),
                vllm_args=args,
                vllm_args_source=source,
            ),
            max_model_len_matches=(
                None
                if mine is None or mine.max_model_len is None
                else mine.max_model_len == settings.vllm.max_model_len
            ),
        )

    def _vllm_args(self, stack: str, settings: Settings) -> tuple[list[str], str]:
        """The deployed command line (the ``vllm_command_line`` output), else the arguments
        ``serving.render.vllm`` renders from the stack file."""
        try:
            line = self.deployments.outputs(stack).get("vllm_command_line")
        except d.DeploymentError:
            line = None
        if isinstance(line, str) and line.strip():
            try:
                argv = shlex.split(line)
            except ValueError:
                argv = []
            if argv[:2] == ["vllm", "serve"]:
                return argv[2:], "stack output vllm_command_line"
        cloud_run = platform_of(settings) == "cloud-run"
        rendered = render(
            settings,
            model_path=settings.model.model,
            port=CLOUD_RUN_PORT if cloud_run else settings.network.serving_port,
        )
        return list(rendered.args), "rendered from the stack file by serving.render.vllm"

    async def query(
        self, stack: str, prompt: str, max_tokens: int, endpoint_index: int
    ) -> models.QueryResult:
        if not prompt.strip():
            raise ToolFailure("prompt is empty")
        target = self.deployments.target(stack, endpoint_index)
        async with make_client(target.url, auth=target.auth, timeout_s=180) as client:
            result = await check_chat(
                client, target.served_model_name, prompt=prompt, max_tokens=max_tokens
            )
        if not result.ok:
            raise ToolFailure(f"chat completion failed: {result.detail}")
        data = result.data
        latency = float(data["latency_s"])
        ttft = data.get("ttft_s")
        tokens = int(data["completion_tokens"])
        decode = (
            (tokens - 1) / (latency - ttft)
            if ttft is not None and tokens > 1 and latency > ttft
            else None
        )
        return models.QueryResult(
            stack=stack,
            url=target.url,
            model=target.served_model_name,
            content=str(data.get("content") or ""),
            finish_reason=data.get("finish_reason"),
            ttft_s=ttft,
            latency_s=latency,
            prompt_tokens=int(data["prompt_tokens"]),
            completion_tokens=tokens,
            tokens_per_s=tokens / latency if latency > 0 else None,
            decode_tokens_per_s=decode,
        )

    async def _scrape(self, client: Any, model: str) -> MetricsSnapshot:
        try:
            return await fetch_metrics(client, model_name=model)
        except AuthError as exc:
            raise ToolFailure(f"no credentials, request not sent: {exc}") from None
        except MetricsParseError as exc:
            raise ToolFailure(f"malformed /metrics: {exc}") from None
        except Exception as exc:
            raise ToolFailure(f"/metrics: {type(exc).__name__}: {exc}") from None

    async def metrics(
        self, stack: str, window_seconds: float, endpoint_index: int, progress: Progress
    ) -> models.MetricsResult:
        target = self.deployments.target(stack, endpoint_index)
        model = target.served_model_name
        async with make_client(target.url, auth=target.auth, timeout_s=30) as client:
            before = await self._scrape(client, model)
            t0 = time.monotonic()
            step = max(1.0, window_seconds / 10)
            while (left := window_seconds - (time.monotonic() - t0)) > 0:
                await progress(window_seconds - left, window_seconds, f"window: {left:.0f} s to go")
                await asyncio.sleep(min(step, left))
            after = await self._scrape(client, model)
            window = time.monotonic() - t0

        def delta(name: str) -> float | None:
            a, b = before.raw.get(name), after.raw.get(name)
            return None if a is None or b is None else max(0.0, b - a)

        prompt = delta("vllm:prompt_tokens_total")
        generated = delta("vllm:generation_tokens_total")
        ttft_n, ttft_sum = (
            delta("vllm:time_to_first_token_seconds_count"),
            delta("vllm:time_to_first_token_seconds_sum"),
        )
        e2e_n, e2e_sum = (
            delta("vllm:e2e_request_latency_seconds_count"),
            delta("vllm:e2e_request_latency_seconds_sum"),
        )
        acceptance = spec_decode_acceptance(before, after)
        return models.MetricsResult(
            stack=stack,
            url=target.url,
            window_s=round(window, 3),
            num_requests_running=after.num_requests_running,
            num_requests_waiting=after.num_requests_waiting,
            kv_cache_usage=after.kv_cache_usage,
            prompt_tokens=prompt,
            generation_tokens=generated,
            prompt_tokens_per_s=None if prompt is None else prompt / window,
            generation_tokens_per_s=None if generated is None else generated / window,
            requests_finished=e2e_n,
            mean_ttft_s=ttft_sum / ttft_n if ttft_n and ttft_sum is not None else None,
            mean_e2e_s=e2e_sum / e2e_n if e2e_n and e2e_sum is not None else None,
            spec_decode=acceptance,
            speculative_decoding_on=after.spec_decode is not None,
        )

    # Capacity plan and cost ------------------------------------------------------------------

    def plan(
        self,
        stack: str,
        requests_per_second: float | None,
        what_if_key: str | None,
        what_if_value: str | int | float | bool | list[str | int | float] | None,
        what_if_also: dict[str, str | int | float | bool | list[str | int | float]] | None = None,
        workload: WorkloadAsk | None = None,
    ) -> models.PlanResult:
        settings = self.deployments.settings(stack)
        ask = (workload or WorkloadAsk()).arguments(settings, requests_per_second)

        def plan_report(name: str, chosen: Any, rate: float | None) -> dict[str, Any]:
            try:
                return report(name, chosen, rate, **ask)
            except PlanError as exc:
                raise ToolFailure(str(exc)) from None

        base = plan_report(stack, settings, requests_per_second)
        if what_if_key is None:
            if what_if_value is not None or what_if_also:
                raise ToolFailure("what_if_value needs what_if_key (the config key to change)")
            return models.PlanResult(stack=stack, what_if=None, fits=bool(base["fits"]), plan=base)
        if what_if_value is None:
            raise ToolFailure(f"what_if_key {what_if_key!r} needs a what_if_value")
        edits = {what_if_key: what_if_value, **(what_if_also or {})}
        changed = d.what_if_settings(self.deployments, stack, edits)
        after = plan_report(stack, changed, requests_per_second)
        changes = {
            k: {"before": base.get(k), "after": v} for k, v in after.items() if base.get(k) != v
        }
        return models.PlanResult(
            stack=stack,
            what_if=", ".join(f"{k}={json.dumps(v)}" for k, v in edits.items()),
            fits=bool(after["fits"]),
            plan=after,
            changes=changes,
        )

    # Benchmark runs ----------------------------------------------------------------------------

    def _run_folders(self, stack: str | None) -> list[tuple[str, Path, str | None]]:
        """Where runs are looked for, as (id prefix, folder, stack the runs must be of): each
        stack's ``<benchmarkResultsDir>/<stack>`` (prefix: the stack), then each of the
        server's run folders (``--runs-dir``, default ``runs``, where the README's ``bench run
        --out runs/NAME`` examples write; prefix: the folder relative to the project)."""
        stacks = [self.deployments.check_stack(stack)] if stack else list(self.deployments.stacks)
        folders: list[tuple[str, Path, str | None]] = []
        for name in stacks:
            folders.append((name, self.deployments.results_dir(name), name))
        for extra in self.deployments.runs_dirs:
            prefix = extra.relative_to(self.deployments.root).as_posix()
            if prefix not in self.deployments.stacks:
                folders.append((prefix, extra, stack))
        return folders

    def bench_runs(self, stack: str | None, limit: int) -> models.BenchRuns:
        found: list[tuple[str, models.BenchRunSummary]] = []
        problems: list[str] = []
        for prefix, folder, must_be in self._run_folders(stack):
            paths = sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []
            for path in (p for p in paths if p.is_dir() and not p.is_symlink()):
                try:
                    run = load_run(path)
                except StoreError as exc:
                    problems.append(str(exc))
                    continue
                if must_be is not None and prefix != must_be and run.run.get("stack") != must_be:
                    continue  # a run in a shared folder made against another stack
                measured = run.measured()
                best = max((c.get("request_throughput") or 0.0 for c in measured), default=None)
                summary = models.BenchRunSummary(
                    run=f"{prefix}/{path.name}",
                    label=run.label,
                    hardware=run.run.get("hardware"),
                    created_at=run.run.get("created_at"),
                    finished_at=run.run.get("finished_at"),
                    cells=len(run.cells),
                    measured=len(measured),
                    skipped=sum(1 for c in run.cells if c.get("status") == "skipped"),
                    best_request_throughput=best,
                )
                found.append((str(run.run.get("created_at") or path.name), summary))
        found.sort(key=lambda item: item[0], reverse=True)
        return models.BenchRuns(runs=[s for _, s in found[:limit]], problems=problems[:20])

    def _load_run_id(self, run_id: str) -> RunData:
        prefix, _, name = run_id.rpartition("/")
        folders = {p: f for p, f, _ in self._run_folders(None)}
        if prefix not in folders or name in ("", ".", "..") or "\\" in name:
            raise ToolFailure(
                f"run {run_id!r} is not a run id; use the `run` of benchmark_runs "
                f"(<stack or runs folder>/<folder>, one of {', '.join(sorted(folders))})"
            )
        folder = folders[prefix]
        path = folder / name
        if path.is_symlink() or not path.is_dir():
            raise ToolFailure(f"run {run_id!r} is not a run folder inside {prefix}")
        return load_run(path)

    def localize(self, text: str) -> str:
        """``text`` with this machine's absolute paths made relative (the project folder's
        paths become project-relative, ``bench-results/l4/...``, the home folder ``~``) and the
        command-line hints of the shared modules told as what this server takes."""
        for cli_hint, mcp_hint in _MCP_HINTS:
            text = text.replace(cli_hint, mcp_hint)
        home = Path.home()
        roots = sorted(
            {(str(p), "") for p in (self.deployments.root, self.deployments.root.resolve())}
            | {(str(p), "~") for p in (home, home.resolve())},
            key=lambda item: len(item[0]),
            reverse=True,
        )
        for root, replacement in roots:
            if len(root) <= 1:
                continue
            # Only a whole path: not inside a URL or a longer name (/app in http://h/app).
            at = rf"(?<![\w.:/~-]){re.escape(root)}"
            text = re.sub(at + "/", replacement + "/" if replacement else "", text)
            text = re.sub(at + r"(?![\w.-])", replacement or ".", text)
        return text

    def bench_compare(self, baseline: str, other: str) -> models.BenchComparison:
        runs = [self._load_run_id(baseline), self._load_run_id(other)]
        comparison = compare_runs(runs)
        data = comparison.as_dict()
        for entry, run_id in zip(data.get("runs") or [], (baseline, other), strict=False):
            if isinstance(entry, dict) and "path" in entry:
                entry["path"] = run_id  # the run id, never a local path
        return models.BenchComparison(
            baseline=baseline,
            other=other,
            comparison=data,
            markdown=comparison.markdown(),
        )

    # Cloud Logging --------------------------------------------------------------------------

    def log_filter(self, stack: str, hours: float) -> str:
        settings = self.deployments.settings(stack)
        since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=hours)
        stamp = since.isoformat(timespec="seconds").replace("+00:00", "Z")
        platform = platform_of(settings)
        if platform == "gke":
            cluster = self._deployed(stack, "cluster_name")
            namespace = self.deployments.outputs(stack).get("namespace") or settings.gke.namespace
            # Cloud Logging's monitored resource for a GKE container (k8s_container).
            scope = (
                'resource.type="k8s_container" AND '
                f"resource.labels.cluster_name={json.dumps(cluster)} AND "
                f"resource.labels.namespace_name={json.dumps(str(namespace))}"
            )
        elif platform == "tpu":
            outputs = self.deployments.outputs(stack)
            names = outputs.get("node_names")
            nodes = [_last_segment(str(n)) for n in names] if isinstance(names, list) else []
            if not nodes:
                raise ToolFailure(
                    f"stack {stack!r} has no node_names output; has it been deployed?"
                )
            ids = " OR ".join(json.dumps(n) for n in nodes)
            scope = f'resource.type="tpu_worker" AND resource.labels.node_id=({ids})'
        else:
            service = self._deployed(stack, "service_name")
            scope = (
                'resource.type="cloud_run_revision" AND '
                f"resource.labels.service_name={json.dumps(service)} AND "
                f"resource.labels.location={json.dumps(settings.region)}"
            )
        return f"{scope} AND severity>=ERROR AND timestamp>={json.dumps(stamp)}"

    async def error_logs(self, stack: str, hours: float, limit: int) -> models.LogsResult:
        log_filter = self.log_filter(stack, hours)
        project = self.deployments.project(stack)
        entries = await self.apis.list_log_entries(project, log_filter, limit)
        out = []
        cap = LIMITS["log_text_chars"]
        for entry in entries:
            text = _entry_text(entry)
            resource = entry.get("resource") or {}
            labels = resource.get("labels") if isinstance(resource, dict) else None
            out.append(
                models.LogEntry(
                    timestamp=entry.get("timestamp"),
                    severity=entry.get("severity"),
                    log_name=entry.get("logName"),
                    resource={
                        "type": str(resource.get("type", "")) if isinstance(resource, dict) else "",
                        **(
                            {str(k): str(v) for k, v in labels.items()}
                            if isinstance(labels, dict)
                            else {}
                        ),
                    },
                    text=redact_cut(text, cap),
                    truncated=len(redact_text(text)) > cap,
                )
            )
        return models.LogsResult(stack=stack, filter=log_filter, entries=out)

    # TPU zones ------------------------------------------------------------------------------

    async def tpu_zones(self, stack: str, progress: Progress) -> models.ZonesResult:
        settings = self.deployments.settings(stack)
        if settings.profile.platform is not Platform.TPU:
            raise ToolFailure(
                f"stack {stack!r} runs on {settings.profile.accelerator} "
                f"({platform_of(settings)}), not a TPU; pick a TPU stack"
            )
        accelerator = settings.profile.accelerator
        project = self.deployments.project(stack)
        locations = await self.apis.list_locations(project)
        offers: list[models.ZoneOffer] = []
        errors: list[str] = []
        semaphore = asyncio.Semaphore(8)
        done = 0

        async def one(zone: str) -> None:
            nonlocal done
            async with semaphore:
                try:
                    types = await self.apis.list_accelerator_types(project, zone)
                except GoogleApiError as exc:
                    errors.append(str(exc))
                    types = []
            done += 1
            await progress(done, len(locations), f"checked {zone}")
            for t in types:
                if t.get("type") == accelerator or _last_segment(str(t.get("name", ""))) == (
                    accelerator
                ):
                    topology = [
                        str(c.get("topology"))
                        for c in t.get("acceleratorConfigs") or []
                        if isinstance(c, dict) and c.get("topology")
                    ]
                    offers.append(
                        models.ZoneOffer(zone=zone, accelerator_type=accelerator, topology=topology)
                    )

        await asyncio.gather(*(one(z) for z in locations))
        offers.sort(key=lambda o: o.zone)
        return models.ZonesResult(
            stack=stack,
            accelerator=accelerator,
            zones=offers,
            locations_checked=len(locations),
            errors=sorted(errors)[:20],
            quota_note=(
                "The TPU API's acceleratorTypes.list reports which zones offer the type, not the "
                "project's quota; check quota in the Cloud console (IAM & Admin > Quotas, "
                "service tpu.googleapis.com) before choosing a zone."
            ),
        )

    # Actions ----------------------------------------------------------------------------------

    async def bench_cell(
        self,
        stack: str,
        concurrency: int,
        prompt_tokens: int,
        output_tokens: int,
        budget_seconds: float,
        progress: Progress,
    ) -> models.BenchCellResult:
        settings = self.deployments.settings(stack)
        target = self.deployments.target(stack, 0)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        # A fresh folder per call: two calls within a second never share a run.
        out_dir = self.deployments.results_dir(stack) / f"{stamp}-mcp-cell-{uuid.uuid4().hex[:6]}"
        options = SweepOptions(
            num_requests=max(4, 4 * concurrency),
            warmup=1,
            timeout_s=min(180.0, budget_seconds),
            max_cell_seconds=budget_seconds,
            ready_timeout_s=min(60.0, budget_seconds),
            hardware=settings.hardware,
            label=f"{stack} cell c{concurrency} p{prompt_tokens} o{output_tokens}",
            progress=False,
            extra={"stack": stack, "speculative_method": settings.model.speculative_method},
        )
        grid = Grid((concurrency,), (prompt_tokens,), (output_tokens,))
        started = time.monotonic()
        task = asyncio.create_task(
            run_sweep_async(
                target.url,
                target.served_model_name,
                grid,
                out_dir,
                auth=target.auth,
                options=options,
            )
        )
        # Requests in flight finish within their own timeout after the cell's budget.
        hard_limit = budget_seconds + options.ready_timeout_s + options.timeout_s + 30
        while not task.done():
            elapsed = time.monotonic() - started
            if elapsed > hard_limit:
                task.cancel()
                break
            await progress(
                min(elapsed, budget_seconds), budget_seconds, f"{elapsed:.0f} s into the cell"
            )
            await asyncio.wait({task}, timeout=2.0)
        try:
            try:
                run = await task
            except asyncio.CancelledError:
                raise ToolFailure(f"the cell ran past {hard_limit:.0f} s and was stopped") from None
            except AuthError as exc:
                raise ToolFailure(f"no credentials, request not sent: {exc}") from None
            except PreflightError as exc:
                raise ToolFailure(f"preflight failed, nothing was measured: {exc}") from None
            except Exception as exc:
                raise ToolFailure(
                    f"the benchmark cell failed: {type(exc).__name__}: {exc}"
                ) from None
            if not run.cells:
                raise ToolFailure("the benchmark cell produced no result")
            cell = run.cells[-1]
            status = cell.get("status")
            if status == "skipped":
                raise ToolFailure(f"cell skipped: {cell.get('skip_reason')}")
        except ToolFailure:
            shutil.rmtree(out_dir, ignore_errors=True)  # nothing measured: no run folder left
            raise
        run_id = f"{stack}/{out_dir.name}"
        if status != "ok":
            problems = "; ".join(str(p) for p in cell.get("problems") or []) or "no detail"
            samples = [
                redact_cut(
                    f"{s.get('kind')}"
                    + (f" HTTP {s.get('status')}" if s.get("status") is not None else "")
                    + f": {s.get('error')}",
                    MAX_ECHO_CHARS,
                )
                for s in (cell.get("failure_samples") or [])[:3]
                if isinstance(s, dict)
            ]
            shown = f"; first failures: {' | '.join(samples)}" if samples else ""
            raise ToolFailure(f"cell {status}: {problems}{shown} (run {run_id})")
        return models.BenchCellResult(run=run_id, cell=cell)

    async def preview(self, stack: str, progress: Progress) -> models.PreviewResult:
        self.deployments.settings(stack)
        from preview.build import build_preview  # loads Pulumi's mocks: only when called

        stack_file = self.deployments.root / f"Pulumi.{stack}.yaml"
        task = asyncio.create_task(asyncio.to_thread(build_preview, stack, stack_file=stack_file))
        started = time.monotonic()
        while not task.done():
            await progress(time.monotonic() - started, None, "previewing under Pulumi's mocks")
            await asyncio.wait({task}, timeout=2.0)
        try:
            result = task.result()
        except Exception as exc:
            raise ToolFailure(f"preview of stack {stack!r} failed: {exc}") from None
        return models.PreviewResult(stack=stack, preview=result.model_dump(mode="json"))


def _segment_or_none(value: Any) -> str | None:
    return _last_segment(str(value)) if value else None


def _failure_detail(state: dict[str, Any]) -> str | None:
    failed = state.get("failedData")
    if isinstance(failed, dict):
        error = failed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return None


def _entry_text(entry: dict[str, Any]) -> str:
    if isinstance(entry.get("textPayload"), str):
        return str(entry["textPayload"])
    payload = entry.get("jsonPayload")
    if isinstance(payload, dict):
        message = payload.get("message")
        return str(message) if isinstance(message, str) else json.dumps(payload)
    proto = entry.get("protoPayload")
    if isinstance(proto, dict):
        status = proto.get("status")
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
        return json.dumps(proto)
    return ""


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replica(pod: dict[str, Any]) -> models.ReplicaStatus:
    """One vLLM Pod: ready, and if not, why (a container's waiting reason, or the scheduler's
    message: no node with a free accelerator)."""
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    conditions = {
        str(c.get("type")): c for c in status.get("conditions") or [] if isinstance(c, dict)
    }
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    detail = None
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        detail = f"{scheduled.get('reason') or 'unscheduled'}: {scheduled.get('message') or ''}"
    else:
        for c in containers:
            waiting = (c.get("state") or {}).get("waiting") or {}
            if waiting:
                detail = f"{waiting.get('reason') or 'waiting'}: {waiting.get('message') or ''}"
                break
        if detail is None and not ready and containers:
            detail = "starting (startup probe not passed yet)"
    return models.ReplicaStatus(
        pod=str(meta.get("name") or "?"),
        phase=status.get("phase"),
        ready=ready,
        node=spec.get("nodeName"),
        restarts=sum(_int_or_none(c.get("restartCount")) or 0 for c in containers),
        detail=detail.strip().rstrip(":")[:500] if detail else None,
    )
