"""`gemma4 plan search`: the cheapest configuration that meets a workload's SLO
(:mod:`serving.capacity.configsearch`), printed as tables within 100 columns, as JSON, or
written as a stack file that the offline preview accepts (docs/capacity-planner.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from gemma4.options import (
    add_mtp_option,
    add_project_options,
    add_rate_option,
    bounded_int,
    bounded_number,
    found_project_dir,
)
from gemma4.workload_options import (
    add_target_options,
    add_workload_options,
    targets_from,
    traffic_from,
)
from serving.capacity.configsearch import (
    CAPACITY_TYPES,
    METRICS,
    PLATFORMS,
    SIZING_REQUESTS,
    Goal,
    SearchResult,
    answer_dict,
    describe,
    engine_text,
    search,
    stack_file_text,
    traffic_text,
)
from serving.capacity.costs import money
from serving.capacity.idle import SHAPE_HELP, Shape, parse_shape
from serving.capacity.perf_stack import HEADROOM, MAX_REPLICAS
from serving.capacity.plan import ROOT, PlanError, project_name, raw_stack_settings, stack_names
from serving.capacity.simulate import MAX_REQUESTS, Traffic
from serving.config.groups import BenchmarkSettings
from serving.config.project import ProjectError
from serving.config.stack_config import stack_name_problem

#: Widest a table is drawn in a pipe or a log (a terminal's own width when narrower).
WIDTH = 100
#: Answers shown (the JSON has them all).
SHOWN = 5


def _csv(allowed: Sequence[str]) -> Any:
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(v.strip() for v in text.split(",") if v.strip())
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            # argparse names the option (`argument --platforms: ...`); a value in capitals or
            # with `_` for `-` gets the one it meant.
            first = (bad or [text])[0]
            near = first.lower().replace("_", "-")
            hint = f"; did you mean {near!r}?" if near in allowed else ""
            raise argparse.ArgumentTypeError(
                f"{first[:40]!r} is not one of {', '.join(allowed)}{hint}"
            )
        return values

    return parse


def build_search_parser(add_help: bool = True) -> argparse.ArgumentParser:
    defaults = BenchmarkSettings()
    parser = argparse.ArgumentParser(
        prog="gemma4 plan search",
        add_help=add_help,
        description="The cheapest configuration (platform, hardware, checkpoint, engine "
        "settings, capacity type, replicas) that serves a workload within latency targets: "
        "every configuration the memory plan fits and the settings accept is screened on the "
        "predicted means, the cheapest are sized by a simulation of vLLM's scheduler behind "
        f"the platform's balancer, each replica planned with {HEADROOM * 100:g} % headroom on "
        "the band's slow side. Exit 0 an answer, 1 none meets the targets (the closest is "
        "named), 2 bad input.",
    )
    add_rate_option(
        parser,
        dest="rate",
        help="requests/s offered to the whole endpoint (all replicas; the same figure as "
        "`gemma4 plan -r` and `gemma4 preview -r`; default: a --trace's mean rate)",
    )
    add_workload_options(
        parser,
        f"default {defaults.benchmark_prompt_tokens} prompt, "
        f"{defaults.benchmark_output_tokens} output, the stacks' benchmark shape",
    )
    add_target_options(parser)
    limits = parser.add_argument_group("limits")
    limits.add_argument(
        "--max-replicas",
        type=bounded_int("--max-replicas", 1, MAX_REPLICAS),
        metavar="N",
        help="most replicas (default: what each platform's settings allow)",
    )
    limits.add_argument(
        "--platforms",
        type=_csv(PLATFORMS),
        default=PLATFORMS,
        metavar="P,...",
        help=f"platforms to search, of {', '.join(PLATFORMS)} (default: all)",
    )
    limits.add_argument(
        "--capacity",
        type=_csv(CAPACITY_TYPES),
        default=None,
        metavar="C,...",
        help=f"capacity types, of {', '.join(CAPACITY_TYPES)} (default: on-demand,spot; "
        "flex-start nodes are deleted after maxRunHours, so only when named)",
    )
    limits.add_argument(
        "--allow-flex-start",
        action="store_true",
        help="also offer flex-start (the same as adding it to --capacity)",
    )
    limits.add_argument(
        "--budget",
        type=bounded_number("--budget", 0.0, 1e6),
        metavar="USD_PER_HOUR",
        help="most dollars an hour (answers above it are left out)",
    )
    sim = parser.add_argument_group("simulation")
    sim.add_argument(
        "--requests",
        type=bounded_int("--requests", 100, MAX_REQUESTS),
        default=SIZING_REQUESTS,
        metavar="N",
        help=f"requests simulated per sizing run (default {SIZING_REQUESTS}; more: "
        "a smaller error on p99, slower)",
    )
    sim.add_argument(
        "--seed",
        type=bounded_int("--seed", 0, 2**31 - 1),
        default=0,
        metavar="SEED",
        help="seed of the simulated arrivals and lengths (default 0): one seed, one answer",
    )
    parser.add_argument(
        "--write-stack",
        metavar="NAME",
        help="write the best answer the offline preview accepts as Pulumi.NAME.yaml in the "
        "project (refused when it exists)",
    )
    add_traffic_option(parser)
    add_mtp_option(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_project_options(parser, stack_file=False)
    return parser


def add_traffic_option(parser: argparse.ArgumentParser) -> None:
    """``--traffic SHAPE``: the traffic over a day, to price min instances against cold starts."""
    parser.add_argument(
        "--traffic",
        action="append",
        metavar="SHAPE",
        help=f"the traffic's shape over a day: {SHAPE_HELP} (the --trace's arrivals); prices "
        "each min-instance setting against the requests that meet a cold start "
        "(docs/min-instances.md). A profile's busiest hour is the rate",
    )


def traffic_shape(o: argparse.Namespace) -> tuple[Shape | None, float | None]:
    """``--traffic``'s shape (a trace's arrivals are added from the traffic) and the rate: a
    profile's busiest hour, else ``--rate``."""
    if o.traffic is None:
        return None, o.rate
    if len(o.traffic) > 1:
        raise ValueError(f"--traffic is given {len(o.traffic)} times: give one of {SHAPE_HELP}")
    shape = parse_shape(o.traffic[0])
    if shape.peak is None:
        return shape, o.rate
    if o.rate is not None:
        raise ValueError(
            "--traffic profile gives the rates (its busiest hour is the rate): drop --rate"
        )
    return shape, shape.peak


def arrivals(traffic: Traffic) -> list[float] | None:
    return None if traffic.trace is None else [r.arrival_s for r in traffic.trace]


def _goal(o: argparse.Namespace) -> Goal:
    targets = targets_from(o)
    if not targets:
        raise ValueError(
            "give at least one latency target, e.g. --ttft-p95-ms 2000 (percentiles: "
            "--{ttft,itl,e2e}-{p50,p95,p99}-ms; means: --ttft-ms, --itl-ms, --e2e-ms)"
        )
    defaults = BenchmarkSettings()
    shape, rate = traffic_shape(o)
    traffic = traffic_from(
        o, rate, defaults.benchmark_prompt_tokens, defaults.benchmark_output_tokens
    )
    capacity = tuple(o.capacity or ("on-demand", "spot"))
    if o.allow_flex_start and "flex-start" not in capacity:
        capacity = (*capacity, "flex-start")
    if o.budget is not None and not 0 < o.budget <= 1e6:
        raise ValueError(
            f"--budget must be a number of dollars an hour in (0, 1e6], got {o.budget}"
        )
    return Goal(
        traffic,
        targets,
        max_replicas=o.max_replicas,
        platforms=tuple(o.platforms),
        capacity=capacity,
        budget_usd_per_hour=o.budget,
        requests=o.requests,
        seed=o.seed,
        mtp_acceptance=None if o.mtp_acceptance is None else float(o.mtp_acceptance),
        preferred=tuple(stack_names(ROOT)),
        shape=None if shape is None else shape.with_trace(arrivals(traffic)),
    )


def search_main(argv: Sequence[str]) -> int:
    o = build_search_parser().parse_args(list(argv))
    try:
        goal = _goal(o)
        root = found_project_dir(o.project_dir)
        names = stack_names(root)
        if not names:
            raise ValueError(f"no Pulumi.<stack>.yaml in {root}")
        if o.write_stack is not None:
            problem = stack_name_problem(o.write_stack, "--write-stack")
            if problem:
                raise ValueError(problem)
            target = root / f"Pulumi.{o.write_stack}.yaml"
            if target.exists() or target.is_symlink():
                raise ValueError(
                    f"--write-stack: {target} exists; choose another name or remove it"
                )
        print(
            f"gemma4 plan search: starting from {', '.join(f'Pulumi.{n}.yaml' for n in names)}"
            f" in {root.resolve()}",
            file=sys.stderr,
        )
        stacks = {}
        for name in names:  # a stack file that cannot be read is skipped, said so
            try:
                stacks[name] = raw_stack_settings(name, root)
            except PlanError as exc:
                print(f"gemma4 plan search: skipping Pulumi.{name}.yaml: {exc}", file=sys.stderr)
        if not stacks:
            raise ValueError(f"no readable Pulumi.<stack>.yaml in {root}")
        result = search(
            stacks, goal, lambda line: print(f"gemma4 plan search: {line}", file=sys.stderr)
        )
    except (ValueError, PlanError, ProjectError) as exc:
        print(f"gemma4 plan search: error: {exc}", file=sys.stderr)
        return 2
    written = None
    refusals: list[str] = []
    if o.write_stack is not None and result.answers:
        written, refusals = _write(result, o.write_stack, root)
    if o.json:
        doc = as_json(result)
        doc["written"] = str(written) if written else None
        doc["write_refusals"] = refusals
        print(json.dumps(doc, indent=2))
    else:
        _print(result)
        if written:
            print(f"wrote {written} (the offline preview's verdict: OK)")
    if not result.answers:
        print(f"gemma4 plan search: {none_meets(result)}", file=sys.stderr)
        return 1
    if o.write_stack is not None and written is None:
        print(
            "gemma4 plan search: no answer was written: the offline preview refused each: "
            + "; ".join(refusals),
            file=sys.stderr,
        )
        return 1
    return 0


def none_meets(result: SearchResult) -> str:
    """Why nothing was answered, naming the closest candidate and what limits it."""
    goal = result.goal
    head = f"no configuration meets {describe(goal.targets)} at {goal.traffic.rate:g} req/s"
    c = result.closest
    if c is None:
        why = "; ".join(result.refused)[:600] or "nothing in the space asked"
        budget = goal.budget_usd_per_hour
        within = f" within --budget ${budget:g}/h (an unknown price cannot be)" if budget else ""
        return (
            f"{head}{within}: nothing to size ({result.considered} configurations considered"
            f"; left out: {why})"
        )
    if result.set_aside:  # candidates that met the targets, set aside for a named reason
        return f"{head} that can be answered: " + "; ".join(result.set_aside)
    why = c.sizing.why if c.sizing is not None else "the predicted means already miss it"
    if c.sizing is not None and c.sizing.quota_capped:
        why += "; a quota increase (more replicas than the platform's settings allow) is needed"
    return f"{head}; closest: {c.platform}/{c.hardware} ({engine_text(c)}): {why}"


def _write(result: SearchResult, name: str, root: Path) -> tuple[Path | None, list[str]]:
    """Write the best answer the offline preview accepts; nothing is left of one it refuses."""
    from gemma4.preview import verdict_line
    from preview.build import PreviewError, build_preview

    project = project_name(root)
    path = root / f"Pulumi.{name}.yaml"
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    refusals = []
    for c in result.answers:
        text = stack_file_text(c, result.goal, result, project, name, today)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        created = placed = False
        try:
            # Written beside (never through a link), then linked into place: a file that
            # appeared meanwhile (a second writer) makes the link fail rather than be replaced.
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(tmp, flags, 0o644)
            created = True
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.link(tmp, path)
            placed = True
            preview = build_preview(name, path, project_dir=root)
        except (OSError, PreviewError) as exc:
            if placed:
                with contextlib.suppress(OSError):
                    path.unlink()
            refusals.append(f"{c.platform}/{c.hardware}: {exc}")
            if isinstance(exc, FileExistsError) and not placed:
                break  # another writer took the name: nothing of ours to place
            continue
        finally:
            if created:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        if preview.ok:
            return path, refusals
        path.unlink()
        refusals.append(f"{c.platform}/{c.hardware}: {verdict_line(preview)}")
    return None, refusals


def as_json(result: SearchResult) -> dict[str, Any]:
    goal = result.goal
    closest = result.closest
    return {
        "workload": traffic_text(goal.traffic),
        "rate": goal.traffic.rate,
        "targets": [{"metric": t.metric, "stat": t.stat, "ms": t.ms} for t in goal.targets],
        "answers": [answer_dict(c, goal, i) for i, c in enumerate(result.answers, 1)],
        "considered": result.considered,
        "left_out": result.refused,
        "screened_out": result.screened_out,
        "set_aside": result.set_aside,
        "closest": None
        if closest is None
        else {
            "platform": closest.platform,
            "hardware": closest.hardware,
            "engine": engine_text(closest),
            "why": closest.sizing.why if closest.sizing else "the predicted means miss it",
            "quota_increase_needed": bool(closest.sizing and closest.sizing.quota_capped),
        },
        "measured": False,
    }


def warm_line(a: dict[str, Any]) -> str:
    """An answer's min instances against cold starts, and what fewer would break."""
    rows = {r["min_instances"]: r for r in a["min_instances_rows"]}
    row, fewest = rows[a["min_instances"]], a["min_instances_rows"][0]
    line = (
        f"#{a['rank']} min instances {row['min_instances']} "
        f"({money(row['usd_per_month'], row['price_status']).split('.')[0]}/month): "
        f"{row['cold_share']:.2%} meet a cold start (+{row['added_latency_s']['p50']:,} s)"
    )
    if fewest is not row:
        line += f"; {fewest['min_instances']}: {fewest['cold_share']:.2%}, breaks " + ", ".join(
            f"{m.upper()} {q}" for m, q in (b.split("_") for b in fewest["slo_broken"])
        )
    return line


def _console() -> Console:
    console = Console()
    if not console.is_terminal or console.width > WIDTH:
        console = Console(width=WIDTH)
    return console


def _print(result: SearchResult) -> None:
    goal = result.goal
    console = _console()
    if not result.answers:
        console.print(f"No answer: {none_meets(result)}")
        return
    answers = [answer_dict(c, goal, i) for i, c in enumerate(result.answers, 1)][:SHOWN]
    cost = Table(
        title=f"Cheapest for {traffic_text(goal.traffic)} within {describe(goal.targets)}",
        box=box.SIMPLE_HEAD,
        caption_justify="left",
    )
    for name in ("#", "where", "engine", "replicas", "$/h", "$/month", "$/M req", "$/M tok"):
        cost.add_column(name, justify="right" if name not in ("where", "engine") else "left")
    notes: dict[str, int] = {}
    for a in answers:
        note = notes.setdefault(a["price_source"], len(notes) + 1)
        status = a["price_status"]
        cost.add_row(
            str(a["rank"]),
            f"{a['platform']} {a['hardware']} {a['capacity']} [{note}]",
            a["engine"]
            .replace("max-num-seqs", "seqs")
            .replace("max-model-len", "len")
            .replace("batched tokens", "batch"),
            str(a["replicas"]),
            money(a["usd_per_hour"], status),
            money(a["usd_per_month"], status).split(".")[0],
            money(a["usd_per_million_requests"], status),
            money(a["usd_per_million_output_tokens"], status),
        )
    cost.caption = " ".join(f"[{n}] {source}." for source, n in notes.items()) + (
        " ~: an estimate (a rate not confirmed on Google's page); unknown: no published "
        "figure (ranked last). $/month: 730 h. $/M tok: per million output tokens."
    )
    console.print(cost)
    lat = Table(
        title=f"Predicted latency at {goal.traffic.rate:g} req/s (ms, simulated, not measured)",
        box=box.SIMPLE_HEAD,
        caption_justify="left",
    )
    lat.add_column("#", justify="right")
    for m in METRICS:
        for q in ("p50", "p95", "p99"):
            lat.add_column(f"{m.upper()} {q}", justify="right")
    lat.add_column("binds")
    for a in answers:
        cells = [f"{a['latency_ms'][m][q]:,.0f}" for m in METRICS for q in ("p50", "p95", "p99")]
        lat.add_row(str(a["rank"]), *cells, a["limits"]["slo"].replace("_", " "))
    first = result.answers[0]
    lat.caption = (
        f"Replicas: the fewest whose simulated percentiles meet every target at the planned load "
        f"(the rate x (1 + band) / {1 - HEADROOM:g}); band +/-{first.model.band:.0%} for #1 "
        f"({'calibrated' if first.calibrated else 'uncalibrated priors'}). "
        f"{answers[0]['simulated_requests']} requests simulated per run, seed {goal.seed}; "
        f"p95 error for #1: TTFT +/-{answers[0]['error']['ttft']['p95']:.1%}. "
        f"{result.considered} configurations considered. `--write-stack NAME` writes #1."
    )
    console.print(lat)
    for a in answers:
        if a.get("min_instances_rows"):
            console.print(warm_line(a))
    for problem in result.set_aside:
        console.print(f"Set aside (the settings refuse it as sized): {problem}")
