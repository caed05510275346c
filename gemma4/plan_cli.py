"""`gemma4 plan`: the capacity planner's command line (docs/capacity-planner.md): the plan of
one stack, `plan search` (the cheapest stack and replicas for an SLO) and `plan calibrate`
(fit the model to a benchmark run)."""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from textwrap import wrap
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.results.gate import target_differences, target_identity
from bench.results.store import RunData, StoreError, load_run
from endpoint.redact import redact
from gemma4.options import (
    add_mtp_option,
    add_project_options,
    add_rate_option,
    found_project_dir,
    refuse_unknown_subcommand,
    say_read,
)
from gemma4.search_cli import (
    add_traffic_option,
    arrivals,
    build_search_parser,
    search_main,
    traffic_shape,
)
from gemma4.workload_options import (
    add_target_options,
    add_workload_options,
    targets_from,
    traffic_from,
)
from serving.capacity import itl_spread
from serving.capacity.acceptance import AcceptanceError, run_acceptance
from serving.capacity.calibration import (
    CALIBRATIONS_DIR,
    MAX_FILE_BYTES,
    Calibration,
    CalibrationError,
    calibrate,
    find_start,
)
from serving.capacity.costs import UNKNOWN, money
from serving.capacity.perf import MAX_CONCURRENCY
from serving.capacity.perf_stack import HEADROOM, model_for_settings, vllm_release
from serving.capacity.plan import (
    PlanError,
    load_stack_file,
    load_stack_settings,
    min_instances_report,
    report,
)
from serving.capacity.plan_perf import run_target, workload_for
from serving.capacity.start_budget import waits_text
from serving.capacity.start_records import FIGURES, StartError, check_block, parse_time
from serving.capacity.start_records import summary as start_summary
from serving.catalog.hardware import CONFIRMED, ESTIMATE, LOWER_BOUND, status_prefix
from serving.config.inputs import INTEGER
from serving.config.project import ProjectError, missing_stack_file_meant, stack_file
from serving.config.settings import Settings
from serving.config.stack_config import stack_name_problem
from serving.sizing.memory import GIB


def _gib(value: float) -> str:
    return f"{value / GIB:,.2f} GiB"


def _kib(value: float) -> str:
    return f"{value / 1024:,.0f} KiB"


def _least(r: dict[str, Any], mark: str = "at least ") -> str:
    """What a figure says first: ``~`` when its price is an estimate (a rate counted at a named
    source's quote), ``mark`` when a lower bound (a total leaving out an item with no figure
    anywhere)."""
    return status_prefix(r.get("price_status", CONFIRMED), mark)


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
        (
            "price, one instance",
            money(r["usd_per_hour"], r["price_status"], "/h"),
            "how priced: [1] under the table",
        ),
        (
            "billed a month",
            money(r["usd_per_month_billed"], r["price_status"], "/month"),
            f"{r['billed_hours_per_month']:g} h: {r['billing']}",
        ),
    ]
    load = f"{r['requests_per_second']:g} req/s ({r['requests_per_second_source']})"
    if r["serving_replicas"]:
        status = r["price_status_at_rate"]
        rows += [
            (
                "serving the load",
                money(r["usd_per_hour_at_rate"], status, "/h"),
                f"{money(r['usd_per_month_at_rate'], status, '/month')}; {load} over "
                f"{r['serving_replicas']} replica(s) ({r['serving_replicas_source']}), "
                f"{r['requests_per_second_per_replica']:.3g} req/s each",
            ),
            (
                "cost per million requests",
                money(r["usd_per_million_requests"], status),
                "at the load above",
            ),
            (
                "cost per million output tokens",
                money(r["usd_per_million_output_tokens"], status),
                f"at the load above ({r['performance']['output_tokens']} output tokens a request)",
            ),
        ]
    else:
        rows.append(("serving the load", "-", f"{load}: {r['serving_replicas_source']}"))
    for row in rows:
        t.add_row(*row)
    notes = "".join(f" [{note}]" for note in r["price_unconfirmed"])
    t.caption = (
        f"Runtime constants: {r['runtime_profile']}; see serving/sizing/memory.py for sources.\n"
        f"[1] {_STATUS_NOTE[r['price_status']]}{r['price_source']}{notes}"
    )
    t.caption_justify = "left"
    return t


#: What the footnote of a price says first, by the price's status.
_STATUS_NOTE = {
    CONFIRMED: "",
    ESTIMATE: "~ : an estimate (a rate not confirmed on Google's price page, counted at a named "
    "source's quote). ",
    LOWER_BOUND: ">= : a lower bound (an item with no figure anywhere is left out). ",
    UNKNOWN: "unknown: a rate has no figure anywhere (UNKNOWN below: never counted as 0), so the "
    "price and every figure built from it are unknown. ",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 plan",
        description="Print a stack's vLLM capacity plan (memory budget, KV cache, concurrency "
        "at full context, decode ceiling, cost) and its predicted performance. Exit 0 it fits, "
        "1 vLLM would refuse to start, 2 bad input. Also: `gemma4 plan search --rate R "
        "--ttft-ms X` (the cheapest stack and replicas for an SLO), `gemma4 plan calibrate "
        "RUN_DIR -s STACK` (fit the model to a run).",
    )
    add_project_options(parser)
    add_rate_option(
        parser,
        dest="rate",
        help="requests/s offered to the whole endpoint (all replicas; the same figure as "
        "`gemma4 preview -r` and `gemma4 plan search --rate`): the replicas the stack's SLO "
        "needs are planned for it and priced, cluster costs included, for the cost per "
        "million requests (default: the stack's sloMinRequestsPerSecond, else what its "
        "fewest replicas serve as planned)",
    )
    add_workload_options(parser, "default: the stack's benchmark's")
    add_target_options(parser)
    parser.add_argument(
        "--concurrency",
        type=concurrency_list,
        default=None,
        metavar="N,...",
        help="requests in flight to predict at, comma-separated (default: 1, powers of two "
        "and max-num-seqs)",
    )
    add_mtp_option(parser, calibration_run=True)
    add_traffic_option(parser)
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE",
        help="also draw the simulated p50/p95/p99 TTFT and E2E against requests/s (the SLO "
        "lines) and output tokens/s per chip and per USD against tokens/s per user (the "
        "band) to FILE (.png or .svg)",
    )
    parser.add_argument(
        "--calibration-run",
        type=Path,
        default=None,
        metavar="RUN_DIR",
        help="a benchmark run of this stack: its spec-decode counters give the MTP "
        "acceptance (unless --mtp-acceptance), and with --plot its measured cells are drawn",
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
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    parser = build_parser()
    refuse_unknown_subcommand(parser, args, list(SUBCOMMANDS), stack_option="-s")
    options = parser.parse_args(args)
    if options.subcommand:  # `plan -s l4 search ...`: run or refused, never dropped
        parser.error(
            f"{options.subcommand!r} comes first: `gemma4 plan {options.subcommand} ...`; the "
            f"options before it are the plan's, not {options.subcommand}'s"
        )
    if not options.stack and options.stack_file is None:
        parser.error("give -s STACK or --stack-file PATH")
    console = Console()
    try:
        if options.stack_file is not None:
            path = options.stack_file
            if not path.exists() and not path.is_symlink():
                meant = missing_stack_file_meant(path, options.project_dir)
                raise PlanError(f"--stack-file {path}: no such file{meant}")
            if not path.is_file():
                raise PlanError(f"--stack-file {path}: not a regular file")
            stack = options.stack or path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
            problem = stack_name_problem(stack, "-s" if options.stack else None)
            if problem:
                raise PlanError(problem)
        else:
            path = stack_file(options.stack, options.project_dir)
            stack = options.stack
            say_read("gemma4 plan", path)  # found from -s: say which project's file
        root = options.project_dir if options.stack_file is None else None
        settings, raw = load_stack_file(path, root)
        bench = settings.benchmark
        traffic = traffic_from(
            options,
            options.rate or 1.0,  # a placeholder: the plan's offered load replaces it
            bench.benchmark_prompt_tokens,
            bench.benchmark_output_tokens,
        )
        shape, rate = traffic_shape(options)
        if options.trace is not None and rate is None:
            rate = traffic_from(options, None, 1, 1).rate  # the trace's own mean rate
        flag = "--trace's mean rate" if rate != options.rate else "--requests-per-second"
        if shape is not None:
            flag = "--traffic profile's busiest hour" if shape.peak else flag
            shape = shape.with_trace(arrivals(traffic))
        workload = workload_for(settings, traffic.prompt_tokens, traffic.output_tokens)
        acceptance = None if options.mtp_acceptance is None else float(options.mtp_acceptance)
        mtp_source = None
        run = None
        if options.calibration_run is not None:
            try:
                run = load_run(options.calibration_run)
            except StoreError as exc:
                raise PlanError(f"--calibration-run {options.calibration_run}: {exc}") from None
            acceptance, mtp_source = run_mtp_acceptance(
                run, settings, acceptance, f"--calibration-run {options.calibration_run}"
            )
        result = report(
            stack,
            settings,
            rate,
            workload,
            flag=flag,
            mtp_acceptance=acceptance,
            concurrencies=options.concurrency,
            mtp_source=mtp_source,
            targets=targets_from(options),
            traffic=traffic,
            raw=raw,
        )
        if shape is not None:
            result |= min_instances_report(settings, shape, result, targets_from(options))
        result["cold_start"] = {**result["cold_start"], **measured_start(stack, settings)}
        if options.plot is not None:
            from serving.capacity.perf_plot import measured_points, plot_stack
            from serving.capacity.plot_style import PlotError

            measured = None
            if run is not None:
                measured = measured_points(run.cells, workload)
                if not measured:
                    raise PlanError(
                        f"--calibration-run {options.calibration_run}: no measured cell with "
                        f"a request rate at {workload.prompt_tokens} prompt + "
                        f"{workload.output_tokens} output tokens (--prompt-tokens, "
                        "--output-tokens)"
                    )
            try:
                plot_stack(
                    options.plot,
                    stack,
                    settings,
                    traffic,
                    mtp_acceptance=acceptance,
                    measured=measured,
                )
            except PlotError as exc:
                raise PlanError(str(exc)) from None
            print(f"gemma4 plan: wrote {options.plot}", file=sys.stderr)
    except (ValueError, PlanError, ProjectError) as exc:
        print(f"gemma4 plan: error: {exc}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        console.print(table(result))
        console.print(perf_table(result["stack"], result["performance"]))
        console.print(replica_table(result["stack"], result["replicas"]))
        console.print(
            cold_start_text(result["stack"], result["cold_start"])
            + "\n"
            + waits_text(result["cold_start"]["waits"]),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        if shape is not None:
            print(min_instances_text(result["stack"], result))
    return 0 if result["fits"] else 1


def measured_start(stack: str, settings: Settings) -> dict[str, Any]:
    """``{"measured": {p50_s, p90_s, n, source}}``: the stack's starts to the first token as
    `plan calibrate` kept them from its post-deploy runs (empty when none is kept)."""
    found = find_start(stack, start_target(settings), CALIBRATIONS_DIR)
    if found is None or found[1]["first_token_s"] is None:
        return {}
    path, start = found
    return {"measured": {**start["first_token_s"], "source": f"calibration {path.name}"}}


def start_target(settings: Settings) -> dict[str, str]:
    """What a measured start is of beyond the stack's name: what `bench gate` matches a run by
    (image, checkpoint, speculative decoding), the hardware and the platform. A same-named
    stack elsewhere, or this one once any of them changed, is shown none of its starts."""
    return {
        **target_identity(settings),
        "hardware": settings.hardware,
        "platform": settings.deploy_platform,
    }


def cold_start_text(stack: str, block: dict[str, Any]) -> str:
    """The cold start block, under 100 columns: a line a phase (p50, p90, basis and the data
    file's figure, whose source `--json` and docs/cold-start.md give), the totals, the weights,
    and the starts deploys of this stack measured (:func:`measured_start`), when kept."""
    lines = [
        f"Cold start: stack {stack}, scale-out to first token (PREDICTED, compile cache "
        f"{block['cache']})"
    ]
    for p in block["phases"]:
        lines.append(
            f"  {p['name']:<13}{p['seconds']:>7,.0f} s  p90 {p['p90_s']:>6,.0f} s  "
            f"{p['basis']:<11}{p['figure']}"
        )
    cold, hit = block["cold"], block["cache_hit"]
    other = (
        f"first start of a configuration p50 {cold['p50_s']:,} s, p90 {cold['p90_s']:,} s"
        if block["cache"] == "kept"
        else f"with a cache hit p50 {hit['p50_s']:,} s, p90 {hit['p90_s']:,} s"
    )
    lines += [
        f"  total: p50 {block['p50_s']:,} s, p90 {block['p90_s']:,} s; {other}",
        f"  weights: {block['weight_bytes'] / 1e9:.1f} GB at {block['loader_gb_per_s']:g} GB/s "
        f"({block['loader']}); sources and method: docs/cold-start.md",
    ]
    if "measured" in block:
        m = block["measured"]
        lines += [
            f"  MEASURED after deploy: p50 {m['p50_s']:,.0f} s, p90 {m['p90_s']:,.0f} s to first "
            f"token over {m['n']} start{'s' if m['n'] != 1 else ''}",
            f"    ({m['source'][:90]})",
        ]
    return "\n".join(lines)


def min_instances_text(stack: str, r: dict[str, Any]) -> str:
    """``--traffic``'s table, under 100 columns: a line per min-instance setting."""
    basis = r["traffic_shape"]
    shape = basis.get("shape", basis)
    head = f"Min instances: stack {stack}, traffic {_shape_words(shape)} (PREDICTED)"
    if not r["min_instances"]:
        return _within_100([head, f"  {basis['note']}"])
    lines = [
        head,
        "  min  kept warm $/month  meet a cold start  added p50 / p90  percentiles reached  SLO",
    ]
    for row in r["min_instances"]:
        slo = {None: "-", True: "holds"}.get(row["slo_holds"], "breaks")
        broken = ", ".join(f"{m.upper()} {q}" for m, q in (b.split("_") for b in row["slo_broken"]))
        added = f"{row['added_latency_s']['p50']:,} / {row['added_latency_s']['p90']:,} s"
        lines.append(
            f"  {row['min_instances']:>3}  "
            f"{money(row['usd_per_month'], row['price_status']).split('.')[0]:>17}  "
            f"{row['cold_share']:>17.2%}  {added:>15}  "
            f"{', '.join(row['percentiles_reached']) or '-':<19}  {slo} {broken}"
        )
    who = {"cloud-run": "Cloud Run", "gke": "GKE's autoscaler"}[basis["platform"]]
    lines += [
        f"  {who} scales an idle instance in after {basis['idle_s']:g} s; one instance serves "
        f"{basis['requests_per_second_per_instance']:.3g} req/s",
        "  as planned; method and sources: docs/min-instances.md",
    ]
    return _within_100(lines)


def _within_100(lines: list[str]) -> str:
    """The lines; one longer than 100 columns (a long stack name, the targets a row breaks, a
    note) goes on below, indented past the table's first column."""
    return "\n".join(part for line in lines for part in wrap(line, 100, subsequent_indent=" " * 7))


def _shape_words(shape: dict[str, Any]) -> str:
    rate = f"{shape['requests_per_second']:g} req/s"
    if shape["kind"] == "gaps":
        return f"{rate} with {shape['gaps_per_day']} idle gap(s) of {shape['idle_gap_s']:g} s a day"
    if shape["kind"] == "profile":
        return f"a daily profile, busiest hour {rate}"
    if shape["kind"] == "trace":
        return f"a trace of {shape['requests']} requests at {rate}"
    return f"steady at {rate}"


def run_mtp_acceptance(
    run: RunData, settings: Settings, flag: float | None, what: str
) -> tuple[float | None, str | None]:
    """(acceptance, where it comes from) for a plan given a benchmark run: the per-draft-token
    acceptance the run's spec-decode counters measured, unless ``--mtp-acceptance`` gave one
    (the flag wins, and the source says what the run measured). The counters are checked
    against the stack (:func:`serving.capacity.acceptance.run_acceptance`): a torn, foreign or
    edited run is refused (PlanError, naming the cell and the counter)."""
    model = settings.model
    k = model.num_speculative_tokens if model.speculative_method == "mtp" else None
    try:
        measured = run_acceptance(run.cells, k, run.label)
    except AcceptanceError as exc:
        raise PlanError(f"{what}: {exc}") from None
    if measured is None:
        return flag, None
    recorded = run.run.get("model")
    if recorded not in (model.model, model.served_model_name):
        measured_what = f"measured model {str(recorded)[:80]!r}" if recorded else "records no model"
        raise PlanError(
            f"{what}: the run {measured_what} and the stack serves {model.model!r}: its MTP "
            "acceptance says nothing about this stack"
        )
    if flag is not None:
        return flag, (
            f"--mtp-acceptance (the run measured {measured.per_draft_token:.3f} per draft "
            f"token: {measured.source()})"
        )
    return measured.per_draft_token, measured.source()


def _ms(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def perf_table(stack: str, perf: dict[str, Any]) -> Table:
    t = Table(
        title=f"Predicted performance: stack {stack}, {perf['prompt_tokens']} prompt + "
        f"{perf['output_tokens']} output tokens per request (means at the client, PREDICTED, "
        "not measured)"
    )
    for name in (
        "concurrency",
        "TTFT ms",
        "ITL ms",
        "E2E ms",
        "output tok/s",
        "req/s",
        "$/M req",
        "$/M output tok",
        "ceiling",
    ):
        # Numbers fold rather than lose digits in a narrow terminal; the first header stays whole.
        t.add_column(name, justify="right", overflow="fold", no_wrap=name == "concurrency")
    status = perf["price_status"]
    for p in perf["curve"]:
        t.add_row(
            str(p["concurrency"]),
            _ms(p["ttft_ms"]),
            _ms(p["itl_ms"]),
            _ms(p["e2e_ms"]),
            f"{p['output_tokens_per_s']:,.0f}",
            f"{p['requests_per_s']:,.2f}",
            money(p["usd_per_million_requests"], status),
            money(p["usd_per_million_output_tokens"], status),
            p["ceiling"],
        )
    spec = ""
    mtp = perf.get("mtp")
    if mtp:
        lo, hi = mtp["bounds"]["none_accepted"], mtp["bounds"]["all_accepted"]
        spec = (
            f" MTP {mtp['speculative_tokens']} drafts, mean accepted length "
            f"{perf['mean_accepted_length']:.2f} ({mtp['acceptance_source']}); bounds at one "
            f"stream: ITL {_ms(lo['itl_ms_at_1'])} ms (nothing accepted) to "
            f"{_ms(hi['itl_ms_at_1'])} ms (everything accepted), capacity "
            f"{lo['capacity_requests_per_s']:,.2f} to {hi['capacity_requests_per_s']:,.2f} req/s."
        )
    measured = {
        "measured": "measured",
        "derived": "NOT measured: DERIVED from published cells",
    }.get(perf["front_end_basis"], "NOT measured, a stand-in")
    t.caption = (
        f"Basis: {perf['basis']}. Band: +/-{perf['band']:.0%}. Capacity "
        f"{perf['capacity_requests_per_s']:,.2f} req/s with every sequence slot busy. "
        f"TTFT and E2E include the platform's front end, {perf['front_end_ms']:.0f} ms "
        f"({measured}).{spec} Model: serving/capacity/perf.py; docs/performance-model.md. "
        f"Costs: one instance at its price [1]."
    )
    return t


def replica_table(stack: str, r: dict[str, Any]) -> Table:
    t = Table(
        title=f"Replicas: stack {stack} at {r['requests_per_second']:g} req/s "
        f"({r['requests_per_second_source']}; PREDICTED, not measured)"
    )
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_column("how")
    simulated = str(r.get("sized_on", "")).startswith("the SLO's percentiles")
    rows: list[tuple[str, str, str]] = [
        (
            "SLO (at the client)",
            r["slo"] or "-",
            "percentiles of the scheduler simulation" if simulated else "front end included",
        )
    ]
    if r.get("per_replica_rps") is not None:
        on_slo = r["slo"] is not None
        how = (
            f"fewest replicas meeting it at the rate x (1 + band) / {1 - HEADROOM:g}"
            if simulated
            else f"{'largest rate meeting it' if on_slo else 'its capacity (every slot busy)'} "
            f"x {1 - HEADROOM:g} ({HEADROOM * 100:g} % headroom) / (1 + band)"
        )
        rows += [
            (
                "each replica within the SLO" if on_slo else "one replica below capacity",
                f"{r['per_replica_rps']:,.2f} req/s",
                how,
            ),
            ("replicas needed", str(r["replicas_needed"]), "at the rate above"),
            (
                f"most replicas ({r['stack_max_replicas']}) serve",
                f"{r['rps_at_max_replicas']:,.2f} req/s",
                "within the SLO" if on_slo else "below capacity",
            ),
        ]
    unpriced = f"; not priced: {', '.join(r['unpriced'])}" if r["unpriced"] else ""
    status = r["price_status"]
    each = money(r["usd_per_hour_per_replica"], status)
    fixed = f" + fixed ${r['fixed_usd_per_hour']:,.2f}" if r["platform"] == "gke" else ""
    rows += [
        (
            "stack's replicas",
            f"{r['stack_min_replicas']} to {r['stack_max_replicas']}",
            "minReplicas/maxReplicas"
            if r["platform"] == "gke"
            else "replicas"
            if r["platform"] == "tpu-vm"
            else "minInstances/maxInstances",
        ),
        *(
            (
                f"cost at the {which}",
                money(r[f"usd_per_hour_at_{end}"], status, "/h"),
                f"{money(r[f'usd_per_month_at_{end}'], status, '/month')}: "
                f"{r[f'stack_{end}_replicas']} x {each}{fixed}{unpriced}",
            )
            for which, end in (("fewest", "min"), ("most", "max"))
        ),
    ]
    for row in rows:
        t.add_row(*row)
    t.caption = r["verdict"]
    return t


#: Most levels `--concurrency` takes.
MAX_LEVELS = 64


def concurrency_list(text: str) -> list[int]:
    """An argparse `type`: ``N,N,...``, each an integer in [1, MAX_CONCURRENCY], at most
    :data:`MAX_LEVELS` of them, sorted and without repeats."""
    parts = text.split(",")
    if not text or len(parts) > MAX_LEVELS:
        raise argparse.ArgumentTypeError(
            f"--concurrency takes 1 to {MAX_LEVELS} comma-separated integers, got {text[:40]!r}"
        )
    out = set()
    for part in parts:
        value = int(part) if INTEGER.fullmatch(part) and len(part) <= 18 else 0
        if not 1 <= value <= MAX_CONCURRENCY:
            raise argparse.ArgumentTypeError(
                f"--concurrency values must be integers from 1 to {MAX_CONCURRENCY}, "
                f"got {part.strip()[:20]!r}"
            )
        out.add(value)
    return sorted(out)


def build_calibrate_parser(add_help: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 plan calibrate",
        add_help=add_help,
        description="Fit the performance model's coefficients to a benchmark run of a stack "
        "and write the calibration (with its provenance) for that hardware, checkpoint and "
        "vLLM release.",
    )
    parser.add_argument("run_dir", type=Path, help="a `gemma4 bench run` output folder")
    parser.add_argument("-s", "--stack", required=True, help="the stack the run measured")
    parser.add_argument(
        "--where", default=None, help="where the server and client ran (free text, 200 chars)"
    )
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="the run measured a fake server: stored, never used for a real stack's prediction",
    )
    parser.add_argument(
        "--allow-other-target",
        action="store_true",
        help="accept a run of another hardware or vLLM release than the stack pins: the "
        "calibration is labelled with what was measured and applies to that target only",
    )
    parser.add_argument(
        "--start-run",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a post-deploy run of this stack whose measured start (run.json's `start`) joins "
        "the run's own in the calibration's cold-start figures; repeatable",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder to write to (default: the package's serving/data/calibrations)",
    )
    add_project_options(parser, stack_file=False)
    return parser


def _cannot_write(folder: Path) -> str | None:
    """Why ``folder`` (made when missing) could not be written, as far as can be told before
    writing: the nearest part of its path that exists is a file, or a folder this process may
    not write into (None: no reason known)."""
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return os.strerror(errno.ENOTDIR)
    if not os.access(existing, os.W_OK | os.X_OK):
        return os.strerror(errno.EACCES)
    return None


def start_refusal(run: RunData, stack: str, settings: Settings) -> str | None:
    """Why ``run``'s measured start says nothing of ``stack`` as it is declared (None: it
    does): the rules of a calibration (model, hardware, vLLM release as the stack pins them)
    and of `bench gate` (the run's stack and target), and the image recorded and the same."""
    try:
        run_target(run.run, settings, stack, allow_other=False)
    except ValueError as exc:
        return str(exc)
    if run.run.get("stack") != stack:
        return (
            f"the run was not made against stack {stack!r} "
            f"(its `stack`: {repr(run.run.get('stack'))[:80]})"
        )
    target = run.run.get("target")
    if not isinstance(target, dict) or target.get("image") != settings.image:
        return f"the run does not record stack {stack!r}'s image {settings.image!r} as its target"
    differences = target_differences(run, stack, settings)
    return "; ".join(differences) if differences else None


def start_figures(
    data: RunData, extra: Sequence[Path], stack: str, settings: Settings
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(run id -> its start figures, notes): the calibrated run's own start when it is one of
    this stack (a note says why not otherwise), and each ``--start-run``'s (refused, naming
    it, when it records none, is not this stack's, or is a start already counted: a copied or
    linked run folder holds the same instance's creation)."""
    figures: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    counted: dict[datetime, str] = {}  # created_at -> the run that counted that start
    runs = [(data, None), *((load_run(path), path) for path in extra)]
    for run, path in runs:
        name = Path(os.path.abspath(run.path)).name  # the folder's own name, for `.` too
        what = f"--start-run {path}" if path is not None else f"the run {name}"
        if name in figures:
            raise ValueError(f"{what}: run {name} is given twice")
        try:
            found = check_block(run.run.get("start", {}), name)
        except StartError as exc:
            raise ValueError(f"{what}: {exc}") from None
        refusal = None if found else "it records no start figure (ready_s, first_token_s)"
        refusal = refusal or start_refusal(run, stack, settings)
        created = parse_time(run.run["start"]["created_at"], "created_at") if found else None
        if refusal is None and created in counted:
            refusal = f"its start (created_at {run.run['start']['created_at']}) is run "
            refusal += f"{counted[created]}'s, counted once"
        if refusal is None and created is not None:
            counted[created] = name
            figures[name] = found
        elif refusal is not None and path is not None:
            raise ValueError(f"{what}: {refusal}")
        else:
            notes.append(f"{what}'s start is not used: {refusal}")
    return figures, notes


def calibrate_main(argv: Sequence[str]) -> int:
    o = build_calibrate_parser().parse_args(list(argv))
    try:
        if o.where is not None and not 0 < len(o.where) <= 200:
            raise ValueError("--where must be 1 to 200 characters")
        root = found_project_dir(o.project_dir)
        source = stack_file(o.stack, root, offers_stack_file=False)  # -s checked before any read
        settings = load_stack_settings(o.stack, root)
        say_read("gemma4 plan calibrate", source.resolve())
        if not o.run_dir.is_dir():
            raise ValueError(f"{o.run_dir}: no such run folder")
        out: Path = CALIBRATIONS_DIR if o.out is None else o.out
        cannot = _cannot_write(out)
        if cannot:  # said now, not after the fit (seconds); the write below still decides
            raise ValueError(f"--out {out}: cannot write ({cannot})")
        data = load_run(o.run_dir)
        release = vllm_release(settings)
        measured_hw, measured_vllm = run_target(data.run, settings, o.stack, o.allow_other_target)
        starts, notes = start_figures(data, o.start_run, o.stack, settings)  # before the fit
        base, _ = model_for_settings(settings, calibrations=None)  # fit from the priors
        calibration = calibrate(
            base,
            data.cells,
            hardware=measured_hw,
            checkpoint=settings.model.model,
            vllm=measured_vllm,
            provenance={
                "run": data.label,
                "run_dir": o.run_dir.name,
                "run_created_at": data.run.get("created_at"),
                "url": data.run.get("url"),
                "where": o.where or "not stated",
                "image": settings.image,
                "stack": o.stack,
                "platform": settings.deploy_platform,
                "fitted_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "synthetic": bool(o.synthetic),
                "other_target": (measured_hw, measured_vllm) != (settings.hardware, release),
            },
        )
        if starts:
            calibration = replace(
                calibration, start=start_summary(o.stack, start_target(settings), starts)
            )
        text = json.dumps(calibration.as_dict(), indent=2) + "\n"
        # Never a file `plan` would refuse (each stack's plan reads every calibration).
        Calibration.from_dict(json.loads(text), "the calibration")
        if len(text.encode()) > MAX_FILE_BYTES:
            raise ValueError(
                f"the calibration would be {len(text.encode()) >> 10} KiB, over the "
                f"{MAX_FILE_BYTES >> 10} KiB a calibration is read at (start.runs lists "
                f"{len(starts)} runs: give fewer --start-run)"
            )
    except (ValueError, PlanError, StoreError, CalibrationError) as exc:
        # A run record is read as written: a token where a time belongs is not shown.
        print(f"gemma4 plan calibrate: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    name = (
        f"{settings.deploy_platform}--{measured_hw}--{settings.model.card.folder}--"
        f"{measured_vllm.replace(' ', '-')}"
    )
    path = out / f"{name}{'--synthetic' if o.synthetic else ''}.json"
    from serving.promotion import write_atomically

    try:  # whole or not at all: a reader, or a second writer, never sees a torn or mixed file
        out.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text.encode())
    except OSError as exc:
        print(
            f"gemma4 plan calibrate: error: --out {out}: cannot write ({exc.strerror or exc})",
            file=sys.stderr,
        )
        return 2
    print(f"wrote {path}")
    for key, value in calibration.coefficients.as_dict().items():
        print(f"  {key}: {value:.4g}")
    print("held-out median error (fit on alternate concurrencies, predict the others):")
    for metric, error in calibration.held_out_error.items():
        print(f"  {metric}: {'-' if error is None else f'{error:.1%}'}")
    print("spread around the mean at concurrency 1 (the simulation's tails; none: not measured):")
    for label, spread in (("token gap", calibration.itl_spread),
                          ("first token", calibration.ttft_spread)):  # fmt: skip
        shown = ", ".join(
            f"{name} {itl_spread.at(spread, q):.2f}"
            for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
        )
        print(f"  {label}: {shown if spread else 'none'}")
    for note in notes:
        print(note)
    if calibration.start:
        print(f"measured start after deploy ({len(calibration.start['runs'])} runs):")
        for figure in FIGURES:
            got = calibration.start[figure]
            shown = "-" if got is None else f"p50 {got['p50_s']:,.1f} s, p90 {got['p90_s']:,.1f} s"
            print(f"  {figure}: {shown}" + (f" (n {got['n']})" if got else ""))
    return 0


SUBCOMMANDS = {"search": search_main, "calibrate": calibrate_main}


if __name__ == "__main__":
    raise SystemExit(main())
