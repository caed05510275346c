"""Capacity planner: `gemma4 plan -s l4 [--requests-per-second R] [--json]`.

Reads `Pulumi.<stack>.yaml` (no Pulumi CLI needed; `--stack-file PATH` for any stack file),
validates it with the project's typed settings and prints vLLM's memory budget for the
stack, the KV cache it leaves, a batch-1 decode ceiling and costs. The maths is
`serving.memory`, the same model the `gpu-memory-budget` policy enforces at preview time. It
also prints the performance model's predicted latency against throughput per concurrency
(`serving.perf`, `serving.plan_perf`).

`gemma4 plan search --rate R --ttft-ms X ...`: the cheapest stack and replica count meeting an
SLO at a rate. `gemma4 plan calibrate RUN_DIR -s STACK`: fit the model to a benchmark run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from serving.inputs import bounded_number
from serving.memory import (
    GIB,
    MemoryPlan,
    decode_ceiling_tokens_per_s,
    monthly_cost,
)
from serving.perf import Workload
from serving.plan_perf import (
    build_calibrate_parser,
    build_search_parser,
    calibrate_main,
    endpoint_cost,
    offered_load,
    perf_table,
    performance,
    replica_plan,
    replica_table,
    search_main,
    serving_replicas,
    validated_tokens,
    workload_for,
)
from serving.settings import (
    MAX_REQUESTS_PER_SECOND,
    MIN_REQUESTS_PER_SECOND,
    Settings,
    SettingsError,
    load_settings,
)
from serving.stack_config import stack_name_problem
from serving.stack_yaml import StackYamlError, load_document

ROOT = Path(__file__).resolve().parent.parent


class PlanError(Exception):
    """A stack that cannot be planned; the message says why."""


def project_name(root: Path = ROOT) -> str:
    from components.config_namespaces import StackFileError, read_bounded

    path = root / "Pulumi.yaml"
    try:
        data = load_document(read_bounded(path, str(path)))
        return str(data["name"])
    except (StackFileError, StackYamlError, KeyError, TypeError) as exc:
        raise PlanError(f"{path}: no project name ({exc})") from None


def stack_names(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def _stack_path(stack: str, root: Path) -> Path:
    problem = stack_name_problem(stack)
    if problem:
        raise PlanError(problem)
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise PlanError(
            f"no stack file {path.name}; stacks here: {', '.join(stack_names(root)) or 'none'}"
        )
    return path


def stack_config(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The whole `config:` block of `Pulumi.<stack>.yaml` (namespaced keys, e.g. `gcp:project`),
    unvalidated; a file that is not a YAML mapping with a `config:` mapping is a PlanError."""
    from components.config_namespaces import StackFileError, config_block

    try:
        return config_block(_stack_path(stack, root), project_name(root))
    except StackFileError as exc:
        raise PlanError(str(exc)) from None


def raw_stack_settings(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The project's own keys of `Pulumi.<stack>.yaml`, without the namespace, unvalidated."""
    prefix = f"{project_name(root)}:"
    config = stack_config(stack, root)
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def load_stack_settings(stack: str, root: Path = ROOT) -> Settings:
    """Validate `Pulumi.<stack>.yaml` the way the program does (namespaces and keys included)."""
    return load_stack_file_settings(_stack_path(stack, root), root)


def load_stack_file_settings(path: Path, root: Path | None = None) -> Settings:
    """Validate the stack file `path` the way the program does. Its keys are named for the
    project in `root` (default: the project file beside `path`, else this package's)."""
    # The stack file's provider namespaces are checked against the installed pulumi-gcp's own
    # key list (components.config_namespaces reads its generated `config/vars.py`); imported
    # here so that this module, and the performance model beside it, import no Pulumi.
    from components.config_namespaces import StackFileError, read_stack_file

    if root is None:
        from serving.project import project_file

        root = path.parent if project_file(path.parent) is not None else ROOT
    try:
        raw = read_stack_file(path, project_name(root))
        return load_settings(raw)
    except StackFileError as exc:
        raise PlanError(str(exc)) from None
    except SettingsError as exc:
        raise PlanError(f"{path.name}: {exc}") from None


def plan_settings(settings: Settings) -> MemoryPlan:
    """The stack's memory plan: the same one the settings hold a TPU stack to."""
    plan = settings.memory_plan()
    if plan is None:
        raise PlanError(f"{settings.model.model} has no architecture in the model catalog")
    return plan


def report(
    stack: str,
    settings: Settings,
    requests_per_second: float | None = None,
    workload: Workload | None = None,
    *,
    flag: str = "--requests-per-second",
) -> dict[str, Any]:
    """Every figure the planner prints, as plain numbers (bytes, tokens, USD); the predicted
    performance is for ``workload`` (default: the stack's benchmark request shape).
    ``requests_per_second`` is the load offered to the whole endpoint (default: the stack's
    sloMinRequestsPerSecond, else what its fewest replicas serve as planned, said so;
    ``flag`` names where a given one came from): the replica plan sizes the replicas for it,
    and the cost per million requests is priced on those replicas plus the stack's fixed
    costs (:func:`endpoint_cost`)."""
    plan = plan_settings(settings)
    rate, rate_source = offered_load(settings, requests_per_second, flag, workload)
    replicas = replica_plan(settings, rate, rate_source, workload)
    count, count_source = serving_replicas(settings, replicas)
    usd_per_hour_at_rate, usd_per_million = endpoint_cost(settings, rate, count)
    hw = settings.profile
    # One instance (settings.price): a Cloud Run instance, a TPU node, or on GKE one
    # replica's node.
    arch = settings.model.card.architecture
    assert arch is not None
    streamed = plan.weight_bytes + plan.drafter_bytes
    return {
        "stack": stack,
        "hardware": hw.key,
        "accelerator": hw.accelerator,
        "model": settings.model.model,
        "drafter": settings.model.drafter_card.repo_id if settings.model.drafter_card else None,
        "device_memory_bytes": plan.device_bytes,
        "gpu_memory_utilization": plan.utilization,
        "budget_bytes": plan.budget_bytes,
        "weight_bytes": plan.weight_bytes,
        "drafter_bytes": plan.drafter_bytes,
        "activation_bytes": plan.activation_bytes,
        "non_torch_bytes": plan.non_torch_bytes,
        "cuda_graph_bytes": plan.cuda_graph_bytes,
        "runtime_reserve_bytes": plan.runtime_reserve_bytes,
        "kv_available_bytes": plan.kv_available_bytes,
        "kv_cache_dtype": settings.vllm.kv_cache_dtype,
        "kv_layers": [
            {
                "layers": a.layers,
                "kv_heads": a.kv_heads,
                "head_dim": a.head_dim,
                "window": a.window,
            }
            for a in arch.attention
        ],
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_token_past_window": plan.kv_bytes_per_token_full_layers,
        "max_model_len": plan.max_model_len,
        "max_num_batched_tokens": settings.vllm.max_num_batched_tokens,
        "one_sequence_kv_bytes": plan.one_sequence_kv_bytes,
        "kv_tokens": plan.capacity.reported_tokens,
        "kv_pool_tokens": plan.capacity.pool_tokens,
        "kv_blocks": plan.capacity.num_blocks,
        "full_length_sequences": plan.capacity.max_concurrency,
        "max_num_seqs": settings.vllm.max_num_seqs,
        "fits": plan.fits,
        "decode_ceiling_tokens_per_s": decode_ceiling_tokens_per_s(
            hw.memory_bandwidth_bytes_per_s * hw.accelerator_count, streamed
        ),
        "memory_bandwidth_bytes_per_s": hw.memory_bandwidth_bytes_per_s,
        "usd_per_hour": settings.price.usd_per_hour,
        "usd_per_month_always_on": monthly_cost(settings.price.usd_per_hour),
        "billed_hours_per_month": settings.billed_hours_per_month,
        "usd_per_month_billed": monthly_cost(
            settings.price.usd_per_hour, hours=settings.billed_hours_per_month
        ),
        "billing": settings.billing,
        "price_source": f"{settings.price.source} ({settings.price.as_of})",
        "requests_per_second": rate,
        "requests_per_second_source": rate_source,
        "serving_replicas": count,
        "serving_replicas_source": count_source,
        "requests_per_second_per_replica": rate / count if count else None,
        "usd_per_hour_at_rate": usd_per_hour_at_rate,
        "usd_per_million_requests": usd_per_million,
        "runtime_profile": plan.profile.label,
        "performance": performance(settings, workload),
        "replicas": replicas,
    }


def _gib(value: float) -> str:
    return f"{value / GIB:,.2f} GiB"


def _kib(value: float) -> str:
    return f"{value / 1024:,.0f} KiB"


def table(r: dict[str, Any]) -> Table:
    drafter = f" + {r['drafter']}" if r["drafter"] else ""
    t = Table(
        title=f"Capacity plan: stack {r['stack']} ({r['accelerator']}, {r['model']}{drafter})"
    )
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_column("how")
    layers = " + ".join(
        f"{k['layers']} x 2 x {k['kv_heads']} x {k['head_dim']}"
        + (f" (window {k['window']})" if k["window"] else "")
        for k in r["kv_layers"]
    )
    rows: list[tuple[str, str, str]] = [
        ("device memory", _gib(r["device_memory_bytes"]), "hardware catalog"),
        (
            "vLLM budget",
            _gib(r["budget_bytes"]),
            f"gpu-memory-utilization {r['gpu_memory_utilization']}",
        ),
        ("weights", _gib(r["weight_bytes"]), "model catalog"),
        ("drafter", _gib(r["drafter_bytes"]), "MTP assistant" if r["drafter"] else "MTP off"),
        (
            "runtime reserve",
            _gib(r["runtime_reserve_bytes"]),
            f"activations {_gib(r['activation_bytes'])} "
            f"({r['max_num_batched_tokens']} batched tokens) + non-torch "
            f"{_gib(r['non_torch_bytes'])} + CUDA graphs {_gib(r['cuda_graph_bytes'])}",
        ),
        ("KV cache memory", _gib(r["kv_available_bytes"]), "budget - the above"),
        (
            "KV per token",
            _kib(r["kv_bytes_per_token"]),
            f"{layers} x {r['kv_cache_dtype']} bytes (sliding layers up to their window)",
        ),
        (
            "KV per token past the window",
            _kib(r["kv_bytes_per_token_past_window"]),
            "full-attention layers only",
        ),
        (
            f"KV for one {r['max_model_len']:,}-token sequence",
            _gib(r["one_sequence_kv_bytes"]),
            "sliding layers keep window - 1 + batched tokens",
        ),
        ("KV tokens available", f"{r['kv_tokens']:,}", "vLLM's 'GPU KV cache size'"),
        (
            "full-length sequences",
            f"{r['full_length_sequences']:.2f}x",
            f"'Maximum concurrency'; max-num-seqs {r['max_num_seqs']}"
            + ("" if r["fits"] else " -- DOES NOT FIT: vLLM refuses to start"),
        ),
        (
            "batch-1 decode ceiling",
            f"{r['decode_ceiling_tokens_per_s']:,.0f} tokens/s",
            f"{r['memory_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s / weights read per token",
        ),
        ("price", f"${r['usd_per_hour']:,.2f}/h", r["price_source"]),
        (
            "billed a month",
            f"${r['usd_per_month_billed']:,.0f}/month",
            f"{r['billed_hours_per_month']:g} h: {r['billing']}",
        ),
        (
            "cost per million requests",
            "-"
            if r["usd_per_million_requests"] is None
            else f"${r['usd_per_million_requests']:,.2f}",
            f"{r['requests_per_second']:g} req/s ({r['requests_per_second_source']})"
            + (
                f" over {r['serving_replicas']} replica(s) ({r['serving_replicas_source']}): "
                f"{r['requests_per_second_per_replica']:.3g} req/s each, "
                f"${r['usd_per_hour_at_rate']:,.2f}/h"
                if r["serving_replicas"]
                else f": {r['serving_replicas_source']}"
            ),
        ),
    ]
    for row in rows:
        t.add_row(*row)
    t.caption = f"Runtime constants: {r['runtime_profile']}; see serving/memory.py for sources."
    return t


SUBCOMMANDS = {"search": search_main, "calibrate": calibrate_main}


def build_parser() -> argparse.ArgumentParser:
    from serving.project import add_project_options

    parser = argparse.ArgumentParser(
        prog="gemma4 plan",
        description="Print a stack's vLLM capacity plan (memory budget, KV cache, concurrency "
        "at full context, decode ceiling, cost) and its predicted performance. Exit 0 it fits, "
        "1 vLLM would refuse to start, 2 bad input. Also: `gemma4 plan search --rate R "
        "--ttft-ms X` (the cheapest stack and replicas for an SLO), `gemma4 plan calibrate "
        "RUN_DIR -s STACK` (fit the model to a run).",
    )
    parser.add_argument(
        "-s",
        "--stack",
        default="",
        help="stack name: Pulumi.<stack>.yaml of the Pulumi project in the current directory "
        "or its nearest parent, as `pulumi -s` finds it",
    )
    add_project_options(parser)
    parser.add_argument(
        "-r",
        "--requests-per-second",
        "--rate",
        dest="rate",
        type=bounded_number(
            "-r/--requests-per-second/--rate", MIN_REQUESTS_PER_SECOND, MAX_REQUESTS_PER_SECOND
        ),
        default=None,
        help="requests/s offered to the whole endpoint (all replicas; the same figure as "
        "`gemma4 preview -r` and `gemma4 plan search --rate`): the replicas the stack's SLO "
        "needs are planned for it and priced, cluster costs included, for the cost per "
        "million requests (default: the stack's sloMinRequestsPerSecond, else what its "
        "fewest replicas serve as planned)",
    )
    parser.add_argument(
        "--prompt-tokens", type=int, help="for the prediction (default: the stack's benchmark's)"
    )
    parser.add_argument(
        "--output-tokens", type=int, help="for the prediction (default: the stack's benchmark's)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    # The two subcommands, for --help and the generated reference; main() hands them their
    # arguments before this parser sees any, so `-s` and the rest above are not theirs.
    subs = parser.add_subparsers(
        dest="subcommand", metavar="{search,calibrate}", help="optional: another plan command"
    )
    for name, build, summary in (
        ("search", build_search_parser, "the cheapest stack and replica count for an SLO"),
        ("calibrate", build_calibrate_parser, "fit the performance model to a benchmark run"),
    ):
        child = build(add_help=False)
        subs.add_parser(name, parents=[child], help=summary, description=child.description)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from serving.project import ProjectError, say_read, stack_file

    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    parser = build_parser()
    options = parser.parse_args(args)
    if not options.stack and options.stack_file is None:
        parser.error("give -s STACK or --stack-file PATH")
    console = Console()
    try:
        prompt = validated_tokens("--prompt-tokens", options.prompt_tokens)
        output = validated_tokens("--output-tokens", options.output_tokens)
        if options.stack_file is not None:
            path = options.stack_file
            if not path.exists() and not path.is_symlink():
                raise PlanError(f"--stack-file {path}: no such file")
            if not path.is_file():
                raise PlanError(f"--stack-file {path}: not a regular file")
            stack = options.stack or path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
            problem = stack_name_problem(stack)
            if problem:
                raise PlanError(problem)
        else:
            path = stack_file(options.stack, options.project_dir)
            stack = options.stack
            say_read("gemma4 plan", path)  # found from -s: say which project's file
        root = options.project_dir if options.stack_file is None else None
        settings = load_stack_file_settings(path, root)
        workload = workload_for(settings, prompt, output)
        result = report(stack, settings, options.rate, workload)
    except (ValueError, PlanError, ProjectError) as exc:
        print(f"gemma4 plan: error: {exc}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        console.print(table(result))
        console.print(perf_table(result["stack"], result["performance"]))
        console.print(replica_table(result["stack"], result["replicas"]))
    return 0 if result["fits"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
