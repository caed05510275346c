"""The MCP server: its tools, each run within a deadline, its results and errors redacted and
bounded. Action tools are registered only when named with ``--enable-action``."""

import asyncio
import contextlib
import functools
import inspect
import io
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import IO, Annotated, Any, BinaryIO, TypeVar, cast

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from serving.capacity.perf import MAX_TOKENS
from serving.config.groups import MAX_REQUESTS_PER_SECOND, MIN_REQUESTS_PER_SECOND

from . import models
from ._redaction import redact, redact_cut
from .tools import (
    BENCH_MARGIN_S,
    DEADLINES_S,
    FAILURES,
    HEALTH_MARGIN_S,
    LIMITS,
    METRICS_MARGIN_S,
    Tools,
    WorkloadAsk,
)

ACTIONS: dict[str, str] = {
    "bench-cell": "run_benchmark_cell: sends load to a deployed endpoint and writes a run folder",
    "preview": "start_preview: runs the offline Pulumi preview of a stack (changes nothing)",
}
"""Action tools, by the name ``--enable-action`` takes."""

_READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=True)
_LOCAL_READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)

M = TypeVar("M", bound=BaseModel)

MAX_ERROR_CHARS = 4000
"""The longest tool error text (redacted whole, then cut)."""
MAX_RESULT_CHARS = 256 << 10
"""The most a tool result may weigh as JSON; longer strings in it are cut to fit, marked."""
_CUT_MARK = f"…[truncated: the result exceeded {MAX_RESULT_CHARS} characters]"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + _CUT_MARK


def _walk(fix: Callable[[str], str], value: Any) -> Any:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, dict):
        return {_walk(fix, k): _walk(fix, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(fix, v) for v in value]
    return value


def _bounded_result(data: Any) -> Any:
    """``data`` within :data:`MAX_RESULT_CHARS`: its longest strings cut, each marked; a result
    still too big (too many items) is an error asking for a narrower request."""
    size = len(json.dumps(data))
    limit = 4096
    while size > MAX_RESULT_CHARS and limit >= 64:
        data = _walk(functools.partial(_cut, limit=limit), data)
        size = len(json.dumps(data))
        limit //= 4
    if size > MAX_RESULT_CHARS:
        raise ToolError(
            f"the result ({size} characters) exceeds the server's cap of {MAX_RESULT_CHARS}; "
            "ask for less (a smaller limit, one stack)"
        )
    return data


MAX_NAME_CHARS = 128
"""The longest stack name a tool takes (a deployable one has at most 22 characters)."""
Stack = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="Stack name (Pulumi.<stack>.yaml), see list_stacks",
    ),
]
RunId = Annotated[
    str, Field(min_length=1, max_length=512, description="Run id from benchmark_runs")
]


def validation_words(exc: ValidationError) -> str:
    """A pydantic error in words, one clause per field (``what_if_value: Input should be a
    valid string``), with the value shown cut: never the multi-line dump with its URL."""
    clauses = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "value"
        clauses.append(f"{where}: {error.get('msg', 'invalid')}")
    more = len(exc.errors()) - len(clauses)
    return "; ".join(clauses) + (f"; and {more} more" if more > 0 else "")


def failure_words(exc: Exception) -> str:
    """What a tool says for a failure no tool named: bad input or a malformed answer in words;
    only a bug is an internal error."""
    if isinstance(exc, ValidationError):
        return f"an answer from upstream has a malformed field: {validation_words(exc)}"
    if isinstance(exc, OSError):
        import errno

        if exc.errno == errno.ENAMETOOLONG:
            return "a name is too long for a file name on this machine; nothing was read"
        return f"a local file cannot be read: {exc.strerror or exc}"
    if isinstance(exc, ValueError | TypeError | KeyError | IndexError):
        return f"an answer from upstream is malformed ({type(exc).__name__}: {exc})"
    return f"internal error: {type(exc).__name__}: {exc}"


class _WordedServer(FastMCP[Any]):
    """FastMCP whose argument errors are told in words (the SDK passes pydantic's dump)."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(
                    redact_cut(
                        f"{name}: bad arguments: {validation_words(exc.__cause__)}",
                        MAX_ERROR_CHARS,
                    )
                ) from None
            raise


EndpointIndex = Annotated[
    int, Field(ge=0, le=15, description="Which endpoint of a multi-node stack (0 = first)")
]


_TOLD: tuple[type[Exception], ...] = (*FAILURES, ToolError)
"""The errors a tool answers with their own message (redacted, then cut)."""

Deadline = float | Callable[[dict[str, Any]], float]
"""A tool's overall deadline in seconds: fixed, or computed from its arguments."""


def _safe(
    fn: Callable[..., Awaitable[M]],
    deadline: Deadline,
    localize: Callable[[str], str] = lambda text: text,
) -> Callable[..., Awaitable[M]]:
    """Run a tool within its overall deadline; redact its result; turn every failure into an
    MCP tool error (redacted, then cut)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    async def wrapper(**kwargs: Any) -> M:  # FastMCP passes every argument, defaults included
        seconds = deadline(kwargs) if callable(deadline) else deadline
        try:
            result = await asyncio.wait_for(fn(**kwargs), seconds)
        except TimeoutError:
            raise ToolError(
                f"{fn.__name__} ran past its overall deadline of {seconds:g} s and was stopped "
                "(an endpoint or API that answers too slowly); nothing was changed"
            ) from None
        except _TOLD as exc:
            raise ToolError(redact_cut(localize(str(exc)), MAX_ERROR_CHARS)) from None
        except Exception as exc:  # last resort: a clear error, never a traceback
            raise ToolError(redact_cut(localize(failure_words(exc)), MAX_ERROR_CHARS)) from None
        return type(result).model_validate(
            _bounded_result(_walk(localize, redact(result.model_dump(mode="json"))))
        )

    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    return wrapper


def _progress(ctx: Context[Any, Any, Any]) -> Callable[[float, float | None, str], Awaitable[None]]:
    async def send(progress: float, total: float | None, message: str) -> None:
        try:
            await ctx.report_progress(progress, total, redact_cut(message, 500))
        except Exception:  # a client that went away must not fail the tool
            return

    return send


MAX_STDIN_MESSAGE_BYTES = 4 << 20
"""The longest JSON-RPC message read from stdin (a tool call is a few KiB; a prompt at most
8000 characters): a longer line, or bytes that never end a line (``< /dev/zero``), stop the
server with a usage error instead of growing in memory."""


class BoundedLines:
    """stdin for the stdio transport: one line at a time, at most ``limit`` bytes each. A line
    that is not UTF-8 JSON is dropped with one line on stderr (blank lines silently); a line
    over the limit ends the input (``readline`` answers end of file) and sets
    :attr:`overflow`, so the server stops and the command says why."""

    def __init__(self, raw: BinaryIO, limit: int = MAX_STDIN_MESSAGE_BYTES) -> None:
        self._raw = raw
        self._limit = limit
        self.overflow = False

    def readline(self) -> str:
        while not self.overflow:
            line = self._raw.readline(self._limit + 1)
            if len(line) > self._limit:
                self.overflow = True
                break
            if not line:
                return ""
            try:
                text = line.decode("utf-8")
                if text.strip():
                    json.loads(text)
                    return text
            except (UnicodeDecodeError, ValueError, RecursionError):
                # The SDK would log pydantic's dump of it; one line says what was dropped.
                print(
                    f"gemma4 mcp: ignored a message on stdin that is not UTF-8 JSON "
                    f"({len(line)} bytes)",
                    file=sys.stderr,
                )
        return ""


async def serve_stdio(server: FastMCP[Any], stdin: BoundedLines) -> None:
    """``server``'s tools on stdio, reading requests from the bounded ``stdin``: a low-level
    server (the SDK's public one) answers with FastMCP's public ``list_tools`` and
    ``call_tool``, as ``FastMCP.run_stdio_async`` does with the process's unbounded stdin."""
    lowlevel: Server[Any, Any] = Server(server.name, instructions=server.instructions)
    lowlevel.list_tools()(server.list_tools)  # type: ignore[no-untyped-call]
    lowlevel.call_tool(validate_input=False)(server.call_tool)
    # The SDK's own stdout wrapper would close the process's stdout when it is collected.
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")
    try:
        async with stdio_server(
            stdin=anyio.wrap_file(cast(IO[str], stdin)), stdout=anyio.wrap_file(out)
        ) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        with contextlib.suppress(OSError, ValueError):
            out.detach()


def build_server(
    tools: Tools,
    *,
    actions: Sequence[str] = (),
    host: str = "127.0.0.1",
    port: int = 8765,
    deadline_cap_s: float | None = None,
) -> FastMCP[Any]:
    """A FastMCP server with the read-only tools and the named action tools."""
    unknown = sorted(set(actions) - set(ACTIONS))
    if unknown:
        raise ValueError(f"unknown action(s) {', '.join(unknown)}; allowed: {', '.join(ACTIONS)}")
    server: FastMCP[Any] = _WordedServer(
        "gemma4-vllm",
        instructions=(
            "Operate the Gemma 4 vLLM deployments of this project: stacks, status, health, "
            "model, metrics, capacity plan, benchmarks, logs, TPU zones. Read-only unless an "
            "action tool is listed."
        ),
        host=host,
        port=port,
        log_level="WARNING",
    )

    def tool(
        annotations: ToolAnnotations,
        description: str,
        deadline: Deadline | None = None,
        stated: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Registers the function it decorates as a tool (named like it)."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            seconds = DEADLINES_S[fn.__name__] if deadline is None else deadline
            told = stated or f"{seconds:g} s"
            if deadline_cap_s is not None:
                cap = deadline_cap_s
                seconds = (
                    (lambda a, f=seconds: min(f(a), cap))
                    if callable(seconds)
                    else min(seconds, cap)
                )
            server.add_tool(
                _safe(fn, seconds, tools.localize),
                name=fn.__name__,
                description=f"{description} Overall deadline: {told}; past it the tool stops "
                "and answers an error.",
                annotations=annotations,
                structured_output=True,
            )
            return fn

        return register

    @tool(
        _LOCAL_READ_ONLY,
        "List the stacks this server answers for: hardware, accelerator, platform (cloud-run, "
        "tpu or gke), location, model, "
        "served model name, speculative decoding and endpoint URLs (from the stack outputs).",
    )
    async def list_stacks() -> models.StacksResult:
        return await asyncio.to_thread(tools.list_stacks)

    @tool(
        _LOCAL_READ_ONLY,
        "A stack's endpoints, served model name, Cloud Run service or TPU node names and image, "
        "with how requests authenticate (never the credential).",
    )
    async def stack_endpoints(stack: Stack) -> models.StackEndpoints:
        return await asyncio.to_thread(tools.stack_endpoints, stack)

    @tool(
        _READ_ONLY,
        "Deployment status from Google: the Cloud Run service's conditions and latest ready "
        "revision (Cloud Run Admin API v2), each TPU queued resource's state (TPU API), or on "
        "GKE the vLLM replicas: desired, ready, the autoscaler's bounds and each Pod's state "
        "(Kubernetes Engine API and the cluster's Kubernetes API, GETs only).",
    )
    async def service_status(stack: Stack) -> models.StatusResult:
        return await tools.status(stack)

    @tool(
        _READ_ONLY,
        "Is the model working? Runs the post-deploy health checks (readiness, /v1/models, a chat "
        "completion, /metrics) on every endpoint of the stack; a structured verdict per check. "
        "Waits for a cold start up to deadline_seconds, with progress notifications.",
        lambda a: float(a["deadline_seconds"]) + HEALTH_MARGIN_S,
        f"deadline_seconds + {HEALTH_MARGIN_S:g} s",
    )
    async def health_check(
        stack: Stack,
        ctx: Context[Any, Any, Any],
        deadline_seconds: Annotated[
            float,
            Field(
                ge=5, le=LIMITS["health_deadline_s"], description="Deadline, cold start included"
            ),
        ] = 120,
    ) -> models.HealthResult:
        return await tools.health(stack, deadline_seconds, _progress(ctx))

    @tool(
        _READ_ONLY,
        "The served models (/v1/models, with max_model_len) beside the stack's configuration as "
        "rendered for vLLM: max context, quantization, KV cache dtype, speculative config.",
    )
    async def model_details(stack: Stack, endpoint_index: EndpointIndex = 0) -> models.ModelDetails:
        return await tools.model_details(stack, endpoint_index)

    @tool(
        _READ_ONLY,
        "Send one streamed chat completion to the stack's model; returns the answer (first 200 "
        "characters), time to first token, latency, tokens/s and token counts.",
    )
    async def query_model(
        stack: Stack,
        prompt: Annotated[
            str,
            Field(min_length=1, max_length=LIMITS["prompt_chars"], description="User message"),
        ],
        max_tokens: Annotated[
            int, Field(ge=1, le=LIMITS["max_tokens"], description="Output token cap")
        ] = 128,
        endpoint_index: EndpointIndex = 0,
    ) -> models.QueryResult:
        return await tools.query(stack, prompt, max_tokens, endpoint_index)

    @tool(
        _READ_ONLY,
        "vLLM /metrics over a window: running and waiting requests, KV cache usage, token "
        "deltas and rates, mean TTFT and latency of the window's requests, speculative-decoding "
        "acceptance (rate, mean length, per position).",
        lambda a: float(a["window_seconds"]) + METRICS_MARGIN_S,
        f"window_seconds + {METRICS_MARGIN_S:g} s",
    )
    async def metrics_summary(
        stack: Stack,
        ctx: Context[Any, Any, Any],
        window_seconds: Annotated[
            float,
            Field(ge=1, le=LIMITS["metrics_window_s"], description="Window between two scrapes"),
        ] = 10,
        endpoint_index: EndpointIndex = 0,
    ) -> models.MetricsResult:
        return await tools.metrics(stack, window_seconds, endpoint_index, _progress(ctx))

    @tool(
        _LOCAL_READ_ONLY,
        "The stack's capacity plan and cost (vLLM memory budget, KV cache tokens, full-length "
        "sequences, decode ceiling, $/hour, $/month, $ per million requests and output tokens; "
        "null with price_status unknown where no rate is published); optionally for a "
        "what-if change of one config key (with what_if_also, several), with the figures that "
        "change. Nothing is written.",
    )
    async def capacity_plan(
        stack: Stack,
        requests_per_second: Annotated[
            float | None,
            Field(
                ge=MIN_REQUESTS_PER_SECOND,
                le=MAX_REQUESTS_PER_SECOND,
                description="Requests/s offered to the whole endpoint (all replicas), as "
                "`gemma4 plan -r`: the replicas the SLO needs are planned for it and the cost "
                "per million requests is priced on them (default: the stack's "
                "sloMinRequestsPerSecond, else what its fewest replicas serve as planned)",
            ),
        ] = None,
        what_if_key: Annotated[
            str | None,
            Field(
                max_length=64,
                description="A stack config key to change (camelCase, e.g. maxModelLen)",
            ),
        ] = None,
        what_if_value: Annotated[
            str | int | float | bool | list[str | int | float] | None,
            Field(description="Its new value, validated by the stack settings"),
        ] = None,
        what_if_also: Annotated[
            dict[str, str | int | float | bool | list[str | int | float]] | None,
            Field(
                max_length=7,
                description="Further config keys changed together with what_if_key, e.g. "
                '{"maxNumBatchedTokens": 16384} with maxNumSeqs 16',
            ),
        ] = None,
        prompt_tokens: Annotated[
            int | None,
            Field(
                ge=1,
                le=MAX_TOKENS,
                description="Mean prompt tokens (default: the stack's "
                "benchmark's), as `gemma4 plan --prompt-tokens`",
            ),
        ] = None,
        output_tokens: Annotated[
            int | None,
            Field(
                ge=1,
                le=MAX_TOKENS,
                description="Mean output tokens (default: the stack's benchmark's)",
            ),
        ] = None,
        prompt_p95: Annotated[
            int | None, Field(ge=1, le=MAX_TOKENS, description="95th percentile of prompt tokens")
        ] = None,
        output_p95: Annotated[
            int | None, Field(ge=1, le=MAX_TOKENS, description="95th percentile of output tokens")
        ] = None,
        burstiness: Annotated[
            float,
            Field(
                ge=0.01, le=100, description="Gamma shape of arrivals: 1 Poisson, below 1 burstier"
            ),
        ] = 1.0,
        shared_prefix_tokens: Annotated[
            int,
            Field(
                ge=0,
                le=MAX_TOKENS,
                description="Prompt tokens every request shares at its start (a system prompt "
                "the prefix cache holds)",
            ),
        ] = 0,
        targets: Annotated[
            dict[str, float] | None,
            Field(
                max_length=12,
                description="Latency targets in ms replacing the stack's SLO, keyed as the "
                "options of `gemma4 plan` without dashes: ttft_p95_ms, itl_p99_ms, e2e_ms (a "
                "mean), ...; checked on the scheduler simulation's percentiles",
            ),
        ] = None,
    ) -> models.PlanResult:
        workload = WorkloadAsk(
            prompt_tokens,
            output_tokens,
            prompt_p95,
            output_p95,
            burstiness,
            targets or {},
            shared_prefix_tokens,
        )
        return await asyncio.to_thread(
            tools.plan,
            stack,
            requests_per_second,
            what_if_key,
            what_if_value,
            what_if_also,
            workload,
        )

    @tool(
        _LOCAL_READ_ONLY,
        "Recent benchmark runs (newest first) from the stacks' results folders, with their "
        "best request throughput.",
    )
    async def benchmark_runs(
        stack: Annotated[
            str | None, Field(max_length=MAX_NAME_CHARS, description="Only this stack's runs")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=LIMITS["bench_runs"])] = 10,
    ) -> models.BenchRuns:
        return await asyncio.to_thread(tools.bench_runs, stack, limit)

    @tool(
        _LOCAL_READ_ONLY,
        "Compare two benchmark runs cell by cell (throughput, p95 TTFT, ITL, latency, success, "
        "cost per million requests, deltas in percent).",
    )
    async def compare_benchmarks(
        baseline: RunId,
        other: RunId,
    ) -> models.BenchComparison:
        return await asyncio.to_thread(tools.bench_compare, baseline, other)

    @tool(
        _READ_ONLY,
        "Recent ERROR-or-worse log entries of the stack's Cloud Run service, TPU nodes or GKE "
        "containers from Cloud Logging, newest first, bounded in count and size, secrets "
        "redacted.",
    )
    async def error_logs(
        stack: Stack,
        hours: Annotated[float, Field(gt=0, le=LIMITS["log_hours"])] = 24,
        limit: Annotated[int, Field(ge=1, le=LIMITS["log_entries"])] = 20,
    ) -> models.LogsResult:
        return await tools.error_logs(stack, hours, limit)

    @tool(
        _READ_ONLY,
        "Zones whose TPU API offers the TPU stack's accelerator type (acceleratorTypes.list in "
        "every location); quota is not reported by the API, see quota_note.",
    )
    async def tpu_zones(stack: Stack, ctx: Context[Any, Any, Any]) -> models.ZonesResult:
        return await tools.tpu_zones(stack, _progress(ctx))

    if "bench-cell" in actions:

        @tool(
            ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True),
            "ACTION (enabled with --enable-action bench-cell): sends a load of 4 x concurrency "
            "requests to the stack's deployed endpoint (billed usage, may slow real users) for "
            "at most budget_seconds, and writes a new run folder under the stack's benchmark "
            "results directory. Changes no deployment.",
            lambda a: float(a["budget_seconds"]) + BENCH_MARGIN_S,
            f"budget_seconds + {BENCH_MARGIN_S:g} s",
        )
        async def run_benchmark_cell(
            stack: Stack,
            ctx: Context[Any, Any, Any],
            concurrency: Annotated[int, Field(ge=1, le=LIMITS["bench_concurrency"])] = 1,
            prompt_tokens: Annotated[int, Field(ge=1, le=LIMITS["bench_prompt_tokens"])] = 512,
            output_tokens: Annotated[int, Field(ge=1, le=LIMITS["bench_output_tokens"])] = 128,
            budget_seconds: Annotated[float, Field(ge=5, le=LIMITS["bench_budget_s"])] = 60,
        ) -> models.BenchCellResult:
            return await tools.bench_cell(
                stack, concurrency, prompt_tokens, output_tokens, budget_seconds, _progress(ctx)
            )

    if "preview" in actions:

        @tool(
            ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False),
            "ACTION (enabled with --enable-action preview): runs the offline Pulumi preview of "
            "a stack (mocked cloud, nothing created) and returns the resources it would declare.",
        )
        async def start_preview(stack: Stack, ctx: Context[Any, Any, Any]) -> models.PreviewResult:
            return await tools.preview(stack, _progress(ctx))

    return server
