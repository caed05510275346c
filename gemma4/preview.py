"""`gemma4 preview`: the command line of :func:`preview.build.build_preview` (docs/preview.md):
text, JSON and markdown forms, the diff against a base branch's preview, and the exit status
(0 deployable, 1 a mandatory violation or a model that does not fit, 2 bad input)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from endpoint.redact import redact
from gemma4.guard import interrupts_win
from gemma4.options import add_project_options, add_rate_option, say_read
from preview.build import Preview, PreviewError, Resource, build_preview, stack_file_path


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, scalar or list of scalars) for every leaf of an input tree."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        named = all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in value)
        for i, item in enumerate(value):
            if named:  # containers, envs, volumes: by name, not position
                rest = {k: v for k, v in item.items() if k != "name"}
                yield from flatten(rest or item, f"{path}[{item['name']}]")
            else:
                yield from flatten(item, f"{path}[{i}]")
    else:
        yield path, value


def _short(value: Any, width: int = 160) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # the engine's numbers are floats
    if isinstance(value, list):
        text = " ".join(str(v) for v in value)
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value)
    text = redact(text, limit=None, by_name=False).replace("\n", "\\n")  # redacted before it is cut
    return text if len(text) <= width else f"{text[: width - 20]}... ({len(text)} chars)"


def _tree(resources: Sequence[Resource]) -> list[tuple[int, Resource]]:
    children: dict[str | None, list[Resource]] = {}
    names = {r.name for r in resources}
    for r in resources:
        children.setdefault(r.parent if r.parent in names else None, []).append(r)
    ordered: list[tuple[int, Resource]] = []

    def walk(parent: str | None, depth: int) -> None:
        for r in children.get(parent, []):
            ordered.append((depth, r))
            walk(r.name, depth + 1)

    for siblings in children.values():  # registration order varies between runs
        siblings.sort(key=lambda r: r.name)
    walk(None, 0)
    return ordered


def text_lines(p: Preview) -> list[str]:
    """The human-readable preview (also the body of the markdown one)."""
    plan = p.plan
    lines = [
        f"Preview of stack {p.stack} ({p.stack_file}): {p.hardware}, {p.model}",
        f"gcp:project {p.project}; rendered offline under Pulumi's mocks (no cloud, no CLI)",
        "",
        f"Resources ({len(p.resources)}):",
    ]
    for depth, r in _tree(p.resources):
        indent = "  " * (depth + 1)
        hooks = sorted({h for names in r.hooks.values() for h in names})
        lines.append(
            f"{indent}{r.type}  {r.name}" + (f"  hooks: {', '.join(hooks)}" if hooks else "")
        )
        for key, value in flatten(r.inputs):
            if value in ({}, [], None, ""):
                continue
            lines.append(f"{indent}    {key} = {_short(value)}")
    lines += ["", "vllm serve command line:", f"  {p.vllm_command_line or '(none exported)'}"]
    if p.messages:
        lines += ["", "Program warnings:", *(f"  {m}" for m in p.messages)]
    from serving.capacity.costs import money

    c = p.cost
    status = c.price_status
    lines += ["", "Policies (pack gemma4-vllm, levels from the policy config):"]
    for v in p.policies:
        mark = {"pass": "pass", "fail": "FAIL", "disabled": "off "}[v.verdict]
        lines.append(f"  [{mark}] {v.policy} ({v.enforcement_level})")
        for violation in v.violations:
            lines.append(f"         {violation.resource}: {violation.message}")
    lines += [
        "",
        "Capacity plan:",
        "  per instance (on GKE: per replica, one accelerator each)",
        f"  fits: {'yes' if p.fits else 'NO: vLLM refuses to start'}",
        f"  KV tokens: {plan['kv_tokens']:,}",
        f"  concurrency at full context ({plan['max_model_len']:,} tokens): "
        f"{plan['full_length_sequences']:.2f}x (max-num-seqs {plan['max_num_seqs']})",
        f"  KV cache memory: {plan['kv_available_bytes'] / 2**30:,.2f} GiB of "
        f"{plan['budget_bytes'] / 2**30:,.2f} GiB budget",
        "",
        "Cost (list prices, estimates"
        + {
            "confirmed": "",
            "estimate": "; ~ ESTIMATES: a rate not confirmed on Google's page is counted at "
            "the figure a named source quotes, see below",
            "lower_bound": "; LOWER BOUNDS: an item with no figure anywhere is left out, see below",
            "unknown": "; UNKNOWN: a rate of the instance has no figure anywhere, so its price "
            "and every figure built from it are unknown, see below",
        }[status]
        + "):",
        f"  {money(c.usd_per_hour, status, '/h')} per instance ({c.price_source})",
        f"  per month: {money(c.usd_per_month_per_instance, status)} per instance as billed; "
        f"idle floor {money(c.usd_per_month_idle, status)} ({c.instances_min} instance(s)), at "
        f"most {money(c.usd_per_month_max, status)} ({c.instances_max})",
        *(
            f"  plus {item.item}: "
            + (
                money(item.usd_per_hour, item.status, "/h")
                if item.usd_per_hour is not None
                else "not priced"
            )
            + f" ({item.source})"
            for item in c.fixed
        ),
        f"  serving {c.requests_per_second:g} req/s to the stack ({c.requests_per_second_source})"
        + (
            f" over {c.replicas} replica(s) ({c.replicas_source}), "
            f"{_rate(c.requests_per_second_per_replica or 0.0)} req/s each: "
            + (
                "cost unknown"
                if c.usd_per_hour_at_rate is None
                else f"{money(c.usd_per_hour_at_rate, status, '/h')}, "
                f"{money(c.usd_per_month_at_rate, status, '/month')}, "
                f"{money(c.usd_per_million_requests, status)} per million requests, "
                f"{money(c.usd_per_million_output_tokens, status)} per million output tokens"
            )
            if c.replicas
            else f": {c.replicas_source}"
        ),
        f"  {c.note}",
        *_performance_lines(p.performance),
        *_replica_lines(p.plan.get("replicas")),
        *_percentile_lines(p.plan.get("answer")),
        "",
        verdict_line(p),
    ]
    return lines


def _rate(value: float) -> str:
    """A request rate for the text report: at most two decimals, no trailing zeros."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _percentile_lines(answer: dict[str, Any] | None) -> list[str]:
    """The scheduler simulation's percentiles at the offered load (`gemma4 plan search`'s)."""
    if not answer:
        return []
    lat = answer["latency_ms"]
    parts = ", ".join(
        f"{m.upper()} {'/'.join(f'{lat[m][q]:,.0f}' for q in ('p50', 'p95', 'p99'))}"
        for m in ("ttft", "itl", "e2e")
    )
    return [
        f"  simulated over {answer['replicas']} replica(s) ({answer['balancer']}), p50/p95/p99 "
        f"ms: {parts}"
    ]


def _replica_lines(r: dict[str, Any] | None) -> list[str]:
    """The replicas the stack's SLO needs at the rate (serving.capacity.plan_perf.replica_plan)."""

    if not r:
        return []
    lines = [f"  replicas for the SLO ({r['slo'] or 'none set'}): {r['verdict']}"]
    if r.get("per_replica_rps") is not None:
        lines.append(
            f"    each replica {r['per_replica_rps']:,.2f} req/s, sized on {r['sized_on']}; "
            f"{r['stack_max_replicas']} replica(s) about {r['rps_at_max_replicas']:,.2f} req/s"
        )
    return lines


def _performance_lines(perf: dict[str, Any]) -> list[str]:
    if not perf:
        return []

    def figures(point: dict[str, Any]) -> str:
        if not point["stable"]:
            return "beyond one instance's capacity (the queue grows without bound)"
        return (
            f"TTFT {point['ttft_ms']:,.0f} ms, ITL {point['itl_ms']:,.1f} ms/token, E2E "
            f"{point['e2e_ms']:,.0f} ms, {point['output_tokens_per_s']:,.0f} output tokens/s"
        )

    from serving.capacity.costs import money

    rate, busy = perf["at_rate"], perf["at_concurrency"]
    status = perf["price_status"]
    replicas = rate["replicas"] if rate else 1
    return [
        "",
        f"Predicted performance (PREDICTED means, not measured; {perf['basis']}; band "
        f"+/-{perf['band']:.0%}), {perf['prompt_tokens']} prompt + {perf['output_tokens']} "
        "output tokens per request:",
        (
            f"  at {_rate(rate['requests_per_second'])} req/s per replica "
            f"({rate['stack_requests_per_second']:g} req/s to the stack over {rate['replicas']} "
            f"replica(s)): {figures(rate)}"
            if rate
            else "  at the offered rate: no replica count serves it (see the replica plan)"
        ),
        f"  at concurrency {busy['concurrency']} (one instance full): {figures(busy)}, "
        f"{busy['requests_per_s']:,.2f} req/s, "
        f"{money(perf['usd_per_million_requests'], status)} per million requests, "
        f"{money(perf['usd_per_million_output_tokens'], status)} per million output tokens",
        f"  capacity: {perf['capacity_requests_per_s']:,.2f} req/s per instance with every "
        f"sequence slot busy, {replicas * perf['capacity_requests_per_s']:,.2f} req/s "
        f"over {replicas} replica(s) (gemma4 plan -s STACK for the curve)",
    ]


def verdict_line(p: Preview) -> str:
    if p.ok:
        extra = f" ({p.advisory_violations} advisory finding(s))" if p.advisory_violations else ""
        return f"Verdict: OK, stack {p.stack} would deploy{extra}."
    reasons = []
    if p.mandatory_violations:
        reasons.append(f"{p.mandatory_violations} mandatory policy violation(s)")
    if not p.fits:
        reasons.append("the model does not fit")
    return f"Verdict: BLOCKED, {' and '.join(reasons)}."


def _index(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in data.get("resources") or []:
        if isinstance(r, dict):
            out[f"{r.get('type')} {r.get('name')}"] = dict(flatten(r.get("inputs") or {}))
    return out


def diff_lines(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """What changed between two previews (``--json`` documents), tolerant of older formats."""
    lines: list[str] = []
    before, after = _index(base), _index(head)
    for key in sorted(set(after) - set(before)):
        lines.append(f"+ resource {key}")
    for key in sorted(set(before) - set(after)):
        lines.append(f"- resource {key}")
    for key in sorted(set(before) & set(after)):
        old, new = before[key], after[key]
        for path in sorted(set(old) | set(new)):
            if old.get(path) != new.get(path):
                lines.append(
                    f"~ {key}: {path}: {_short(old.get(path), 60)} -> {_short(new.get(path), 60)}"
                )
    if base.get("vllm_command_line") != head.get("vllm_command_line"):
        lines.append(f"~ vllm serve: {base.get('vllm_command_line')}")
        lines.append(f"          -> {head.get('vllm_command_line')}")

    def verdicts(data: Mapping[str, Any]) -> dict[str, str]:
        return {
            str(v.get("policy")): f"{v.get('verdict')} ({v.get('enforcement_level')})"
            for v in data.get("policies") or []
            if isinstance(v, dict)
        }

    vb, va = verdicts(base), verdicts(head)
    for name in sorted(set(vb) | set(va)):
        if vb.get(name) != va.get(name):
            lines.append(f"~ policy {name}: {vb.get(name, 'absent')} -> {va.get(name, 'absent')}")
    plan_b, plan_a = base.get("plan") or {}, head.get("plan") or {}
    for key in ("fits", "kv_tokens", "full_length_sequences", "max_model_len", "max_num_seqs"):
        if plan_b.get(key) != plan_a.get(key):
            lines.append(f"~ plan {key}: {plan_b.get(key)} -> {plan_a.get(key)}")
    cost_b, cost_a = base.get("cost") or {}, head.get("cost") or {}
    for key in (
        "usd_per_hour",
        "usd_per_month_idle",
        "usd_per_month_max",
        "usd_per_million_requests",
    ):
        if cost_b.get(key) != cost_a.get(key):
            lines.append(f"~ cost {key}: {cost_b.get(key)} -> {cost_a.get(key)}")
    return lines


def markdown(p: Preview, base: Mapping[str, Any] | None = None, base_note: str = "") -> str:
    """A pull-request comment: verdict, diff against the base branch, then the full preview."""
    title = f"### `gemma4 preview -s {p.stack}`: {verdict_line(p).removeprefix('Verdict: ')}"
    parts = [title, ""]
    if base is not None:
        changes = diff_lines(base, p.model_dump(mode="json"))
        parts += ["Changes against the base branch's preview:", "", "```diff"]
        parts += changes or ["(no change)"]
        parts += ["```", ""]
    elif base_note:
        parts += [base_note, ""]
    parts += ["<details><summary>Resources, command line, policies, plan and cost</summary>", ""]
    parts += ["```", *text_lines(p), "```", "", "</details>"]
    return "\n".join(parts) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 preview",
        description="Show what `pulumi up -s STACK` would declare, offline: resources, the vllm "
        "serve command line, every policy's verdict, the capacity plan and the cost. No cloud "
        "and no Pulumi CLI. Exit 0 deployable, 1 a mandatory violation or a model that does "
        "not fit, 2 bad input.",
    )
    add_project_options(parser)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the preview as JSON")
    out.add_argument("--markdown", action="store_true", help="print a pull-request comment")
    parser.add_argument(
        "--diff-against",
        type=Path,
        metavar="JSON",
        help="with --markdown: an earlier preview's --json output (the base branch's) to diff",
    )
    parser.add_argument(
        "--policy-config",
        type=Path,
        help="the policy pack's config, as `pulumi preview --policy-pack-config` takes it "
        "(default: policies/config.json)",
    )
    add_rate_option(
        parser,
        dest="requests_per_second",
        help="requests/s offered to the whole endpoint (all replicas; the same figure as "
        "`gemma4 plan -r` and `gemma4 plan search --rate`): the replicas the stack's SLO "
        "needs are planned for it and priced for the cost per million requests; each "
        "replica's share (rate / replicas) gives the predicted figures (default: the stack's "
        "sloMinRequestsPerSecond, else what its fewest replicas serve as planned)",
    )
    from gemma4.options import add_mtp_option
    from gemma4.workload_options import add_target_options, add_workload_options

    add_mtp_option(parser)
    add_workload_options(parser, "default: the stack's benchmark's")
    add_target_options(parser)
    return parser


def _read_base(path: Path) -> dict[str, Any]:
    from serving.config.inputs import JsonInputError, read_json

    try:
        data = read_json(path)
    except JsonInputError as exc:
        raise PreviewError(f"--diff-against {path}: not a preview JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PreviewError(f"--diff-against {path}: not a preview JSON object")
    shapes = {"resources": list, "policies": list, "plan": dict, "cost": dict}
    for key, kind in shapes.items():
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise PreviewError(
                f"--diff-against {path}: not a preview JSON: {key!r} must be a "
                f"{'list' if kind is list else 'mapping'}"
            )
    command = data.get("vllm_command_line")
    if command is not None and not isinstance(command, str):
        raise PreviewError(f"--diff-against {path}: 'vllm_command_line' must be text")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    if not options.stack and options.stack_file is None:
        parser.error("give -s STACK or --stack-file PATH")
    try:
        base = _read_base(options.diff_against) if options.diff_against else None
        if base is not None and not options.markdown:
            raise PreviewError("--diff-against goes with --markdown")
        path = stack_file_path(options.stack, options.stack_file, options.project_dir)
        if options.stack_file is None:  # found from -s: say which project's file
            say_read("gemma4 preview", path)
        with interrupts_win():  # Ctrl-C cutting the program short: not the stack file's fault
            preview = build_preview(
                options.stack,
                path,
                policy_config=options.policy_config,
                requests_per_second=options.requests_per_second,
                mtp_acceptance=options.mtp_acceptance,
                **_workload(options),
            )
    except PreviewError as exc:
        _say(f"gemma4 preview: error: {exc}", sys.stderr)
        return 2
    except ValidationError as exc:  # pragma: no cover - a bug in this module, not bad input
        _say(f"gemma4 preview: internal error: {exc}", sys.stderr)
        return 2
    if options.json:
        _say(json.dumps(preview.model_dump(mode="json"), indent=2))
    elif options.markdown:
        _say(markdown(preview, base), end="")
    else:
        _say("\n".join(text_lines(preview)))
    return preview.exit_status


def _workload(options: argparse.Namespace) -> dict[str, Any]:
    """The targets the options give, and their workload as a function of the stack's settings
    (lengths not given are the stack's benchmark shape; the offered load, or a trace's own mean
    rate, sets the rate); none given: the stack's benchmark shape and SLO."""
    from gemma4.workload_options import targets_from, traffic_from

    named = [
        options.prompt_tokens,
        options.output_tokens,
        options.prompt_p95,
        options.output_p95,
        options.trace,
        options.shared_prefix_tokens or None,
        None if options.burstiness == 1.0 else options.burstiness,
    ]
    if not any(v is not None for v in named):
        return {"targets": targets_from(options), "traffic": None}

    def traffic(settings: Any) -> Any:
        b = settings.benchmark
        rate = options.requests_per_second or (None if options.trace else 1.0)
        return traffic_from(options, rate, b.benchmark_prompt_tokens, b.benchmark_output_tokens)

    return {"targets": targets_from(options), "traffic": traffic}


def _say(text: str, file: TextIO | None = None, end: str = "\n") -> None:
    """The one way the preview's output leaves: every table, JSON document, markdown comment
    and error message passes through :func:`endpoint.redact.redact` (a label or an argument
    may hold a credential the policies report; it is never shown). Values are judged by what
    they are, not by their names (``"secret": "hf-token"`` names a Secret Manager secret)."""
    print(redact(text, limit=None, by_name=False), file=file or sys.stdout, end=end)


if __name__ == "__main__":
    from gemma4.cli import process_main

    raise SystemExit(process_main(["preview", *sys.argv[1:]]))
