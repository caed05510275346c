"""What `pulumi up -s STACK` would declare, offline, with its verdicts (`gemma4 preview`).

It runs the real Pulumi program for a stack file under Pulumi's mocks (:mod:`preview.harness`),
then judges the declared resources with every policy through pulumi-policy's own analyzer
servicer and adds the capacity plan and the cost (docs/preview.md lists each part). Programs
call :func:`build_preview`; its pydantic result's ``model_dump()`` is what ``gemma4 preview
--json`` prints. Bad input raises :class:`PreviewError`, whose message names the file, key or
stack.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from pydantic import BaseModel, Field

from preview.harness import PROJECT, ROOT
from serving.config.checks import closest_key

#: Inputs never shown: the dynamic provider's pickled code.
HIDDEN_INPUTS = frozenset({"__provider"})
#: Placeholder for a `secure:` config value (only the Pulumi CLI can decrypt it).
SECRET_PLACEHOLDER = "[secret]"
#: Other providers' keys that decide what the program declares: the program reads
#: `gcp:project`; pulumi-gcp takes `gcp:region` and `gcp:zone` as the location of a resource
#: that names none. With the project's own keys (settings, none of them a credential), a
#: `secure:` value on one of these is refused: the preview cannot decrypt it.
READ_PROVIDER_KEYS = ("gcp:project", "gcp:region", "gcp:zone")

Level = Literal["mandatory", "advisory", "disabled", "remediate"]


class PreviewError(Exception):
    """Bad input: the message says what and where (exit status 2)."""


class Resource(BaseModel):
    type: str
    name: str
    parent: str | None = Field(description="Parent resource name; None for the stack.")
    custom: bool = Field(description="A cloud resource (True) or a component (False).")
    inputs: dict[str, Any]
    hooks: dict[str, list[str]] = Field(default_factory=dict)


class Violation(BaseModel):
    resource: str
    type: str
    message: str
    enforcement_level: Level


class PolicyVerdict(BaseModel):
    policy: str
    description: str
    enforcement_level: Level
    verdict: Literal["pass", "fail", "disabled"]
    violations: list[Violation] = Field(default_factory=list)


class CostItem(BaseModel):
    item: str
    #: None: not priced here.
    usd_per_hour: float | None
    source: str
    status: Literal["confirmed", "estimate", "lower_bound"]


class Cost(BaseModel):
    hardware: str
    #: One instance; None (and every figure built from it None) when the price is unknown.
    usd_per_hour: float | None
    price_source: str
    #: The stack's status (serving.capacity.gke_costs.stack_price_status): unknown when the
    #: instance's own rate has no figure anywhere.
    price_status: Literal["confirmed", "estimate", "lower_bound", "unknown"]
    #: Instances billed while idle (Cloud Run minInstances), and at most.
    instances_min: int
    instances_max: int
    #: One instance for a month as billed: 730 h, or a flex-start TPU node's maxRunHours.
    usd_per_month_per_instance: float | None
    usd_per_month_idle: float | None
    usd_per_month_max: float | None
    #: The offered load: requests/s to the whole endpoint (all replicas).
    requests_per_second: float
    requests_per_second_source: str
    #: Replicas the replica plan needs for the load (None: no count serves it, the source says
    #: why).
    replicas: int | None
    replicas_source: str
    requests_per_second_per_replica: float | None
    #: replicas x the instance price + the fixed costs (plan_perf.endpoint_cost, as `gemma4
    #: plan`), and that over the load.
    usd_per_hour_at_rate: float | None
    usd_per_month_at_rate: float | None
    usd_per_million_requests: float | None
    usd_per_million_output_tokens: float | None
    note: str = ""
    #: What is billed at any instance count (GKE: cluster fee, system node, load balancer);
    #: included in usd_per_month_idle and usd_per_month_max.
    fixed: list[CostItem] = Field(default_factory=list)


class Preview(BaseModel):
    stack: str
    stack_file: str
    project: str
    hardware: str
    model: str
    resources: list[Resource]
    outputs: dict[str, Any]
    vllm_command_line: str | None
    #: Warnings the program logged.
    messages: list[str]
    policies: list[PolicyVerdict]
    #: `gemma4 plan --json`'s figures.
    plan: dict[str, Any]
    fits: bool
    cost: Cost
    #: The performance model's PREDICTED means at the cost's request rate and at the
    #: instance's concurrency; never measured figures.
    performance: dict[str, Any] = Field(default_factory=dict)
    mandatory_violations: int
    advisory_violations: int
    #: No mandatory violation and the model fits (exit status 0).
    ok: bool

    @property
    def exit_status(self) -> int:
        return 0 if self.ok else 1


# --- the stack file ------------------------------------------------------------------------


def stack_file_path(
    stack: str, stack_file: Path | None = None, project_dir: Path | None = None
) -> Path:
    """The stack file to read: `stack_file`, or the `Pulumi.<stack>.yaml` that `pulumi -s
    stack` would read (the project in `project_dir`, else the current directory or its nearest
    parent with a `Pulumi.yaml`)."""
    from serving.config.project import ProjectError, missing_stack_file_meant
    from serving.config.project import stack_file as find_stack_file

    if stack_file is not None:
        if not stack_file.exists():
            meant = missing_stack_file_meant(stack_file, project_dir)
            raise PreviewError(f"--stack-file {stack_file}: no such file{meant}")
        if not stack_file.is_file():
            raise PreviewError(f"--stack-file {stack_file}: not a regular file")
        return stack_file
    try:
        return find_stack_file(stack, project_dir)
    except ProjectError as exc:
        raise PreviewError(str(exc)) from None


class _SecureShown(str):
    """A `secure:` config value as the preview shows it (:data:`SECRET_PLACEHOLDER`); a plain
    string with the same text is a plain value."""

    __slots__ = ()


def _holds_secret(value: Any) -> bool:
    """Whether a config value is, or holds anywhere inside it (a list item, a member), a
    `secure:` value: such a key is not checked as text."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _SecureShown):  # the type, not the text: "[secret]" may be plain
            return True
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return False


def secure_keys_read(project: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The keys the program reads (every key of the project's namespace and
    :data:`READ_PROVIDER_KEYS`) that hold a `secure:` value, anywhere inside them; full names."""
    keys = [f"{PROJECT}:{k}" for k, v in project.items() if _holds_secret(v)]
    keys += [k for k in READ_PROVIDER_KEYS if k in other and _holds_secret(other[k])]
    return sorted(keys)


def unreadable_message(keys: list[str]) -> str:
    """Why the preview stops at `secure:` values on keys the program reads, and what to do."""
    named = ", ".join(keys)
    first = keys[0]
    return (
        f"config key(s) {named} hold a secure: value. The Pulumi CLI decrypts it with the "
        "stack's secrets provider before the program reads it; the offline preview cannot, so "
        "it cannot render what would deploy (it does not guess a value). These are not "
        f"secrets: set them in plain text (`pulumi config set {first} VALUE`, without "
        "--secret), or preview a copy of the stack file that has the plain values "
        "(--stack-file PATH)"
    )


def read_stack_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(project keys without the prefix, other namespaces' keys) of a stack file."""
    from serving.config.stack_file import StackFileError, config_block
    from serving.config.stack_yaml import Secure

    try:
        config = config_block(path, PROJECT, shown=str(path))
    except StackFileError as exc:
        raise PreviewError(str(exc)) from None
    project: dict[str, Any] = {}
    other: dict[str, Any] = {}
    prefix = f"{PROJECT}:"

    def shown(value: Any) -> Any:
        if isinstance(value, Secure):
            return _SecureShown(SECRET_PLACEHOLDER)
        if isinstance(value, list):
            return [shown(v) for v in value]
        if isinstance(value, dict):
            return {k: shown(v) for k, v in value.items()}
        return value

    for key, value in config.items():
        value = shown(value)
        if key.startswith(prefix):
            project[key[len(prefix) :]] = value
        else:
            other[key] = value
    return project, other


# --- policies -------------------------------------------------------------------------------


def _policy_config(path: Path) -> dict[str, Any]:
    from serving.config.inputs import JsonInputError, read_json

    try:
        data = read_json(path)
    except JsonInputError as exc:
        raise PreviewError(f"policy config {path}: {exc}") from None
    if not isinstance(data, dict):
        raise PreviewError(f"policy config {path}: expected a JSON object of policy names")
    return data


_MAX_THRESHOLD = 2**53
"""Largest magnitude a threshold may have (the protocol carries numbers as doubles)."""


def _bounded(spec: Any) -> Any:
    """A policy's config schema with every number held to +-2**53 where it sets no bound."""
    if not isinstance(spec, Mapping):
        return spec
    out = {k: _bounded(v) for k, v in spec.items()}
    if spec.get("type") in ("number", "integer"):
        out.setdefault("minimum", -_MAX_THRESHOLD)
        out.setdefault("maximum", _MAX_THRESHOLD)
    return out


def threshold_problem(
    policy: str, thresholds: Mapping[str, Any], properties: Mapping[str, Any]
) -> str | None:
    """Why `thresholds` do not fit `policy`'s config schema (a misspelt name, with the closest
    one; a wrong type, with the expected one), or None. The Pulumi CLI validates a policy
    config file against the same schema before the pack runs; NaN and infinities never get
    here (the file is read by serving.config.inputs.read_json)."""
    for key in thresholds:
        if key not in properties:
            known = ", ".join(sorted(properties)) or "none"
            hint = closest_key(key, properties)
            return f"{policy}: unknown threshold {key!r}{hint}; its thresholds: {known}"
    schema = {"type": "object", "properties": {k: _bounded(v) for k, v in properties.items()}}
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(dict(thresholds))
    )
    if error is not None:
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        )
        return f"{policy}{where}: {error.message[:200]}"
    return None


def _levels_and_configure(
    servicer: Any, config: Mapping[str, Any], source: Path
) -> dict[str, Level]:
    """Configure the servicer as `--policy-pack-config` does; return each policy's level."""
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import analyzer_pb2

    from policies.registry import BY_NAME, PACK_ENFORCEMENT_LEVEL

    enums = typing.get_args(Level)  # the analyzer's EnforcementLevel names, in lower case
    levels: dict[str, Level] = {
        name: (p.enforcement_level or PACK_ENFORCEMENT_LEVEL).value for name, p in BY_NAME.items()
    }
    request: dict[str, Any] = {}
    for name, entry in config.items():
        if name not in BY_NAME:
            raise PreviewError(
                f"policy config {source}: unknown policy {name!r}{closest_key(name, BY_NAME)}; "
                "policies: " + ", ".join(sorted(BY_NAME))
            )
        properties = struct_pb2.Struct()
        if isinstance(entry, str):
            level = entry
        elif isinstance(entry, dict):
            level = entry.get("enforcementLevel", levels[name])
            if not isinstance(level, str):
                raise PreviewError(
                    f"policy config {source}: {name}: enforcementLevel must be a string, one "
                    "of " + ", ".join(enums)
                )
            thresholds = {k: v for k, v in entry.items() if k != "enforcementLevel"}
            schema = BY_NAME[name].config_schema
            problem = threshold_problem(
                name, thresholds, dict(schema.properties) if schema is not None else {}
            )
            if problem:
                raise PreviewError(f"policy config {source}: {problem}")
            properties.update(thresholds)
        else:
            raise PreviewError(f"policy config {source}: {name}: expected a level or an object")
        if level not in enums:
            raise PreviewError(
                f"policy config {source}: {name}: enforcementLevel {level!r}; allowed: "
                + ", ".join(enums)
            )
        levels[name] = level  # type: ignore[assignment]
        request[name] = analyzer_pb2.PolicyConfig(
            enforcementLevel=analyzer_pb2.EnforcementLevel.Value(level.upper()),
            properties=properties,
        )
    servicer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=request), None)
    return levels


def run_policies(
    stack: str, resources: Sequence[Resource], policy_config: Path
) -> list[PolicyVerdict]:
    """Every policy's verdict on the declared resources, through pulumi-policy's analyzer."""
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import analyzer_pb2
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    from policies.registry import ALL, PACK_ENFORCEMENT_LEVEL, PACK_NAME

    servicer: Any = _PolicyAnalyzerServicer(PACK_NAME, "0.1.0", ALL, PACK_ENFORCEMENT_LEVEL)
    levels = _levels_and_configure(servicer, _policy_config(policy_config), policy_config)

    def urn(r: Resource) -> str:
        return f"urn:pulumi:{stack}::{PROJECT}::{r.type}::{r.name}"

    def props(r: Resource) -> struct_pb2.Struct:
        message = struct_pb2.Struct()
        message.update(r.inputs)  # numbers become floats, as the engine sends them
        return message

    found: dict[str, list[Violation]] = {p.name: [] for p in ALL}
    by_urn = {urn(r): r for r in resources}
    diagnostics: list[tuple[Resource | None, Any]] = []
    for r in resources:
        request = analyzer_pb2.AnalyzeRequest(
            type=r.type, properties=props(r), urn=urn(r), name=r.name
        )
        diagnostics += [(r, d) for d in servicer.Analyze(request, None).diagnostics]
    stack_request = analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(type=r.type, properties=props(r), urn=urn(r), name=r.name)
            for r in resources
        ]
    )
    for d in servicer.AnalyzeStack(stack_request, None).diagnostics:
        diagnostics.append((by_urn.get(d.urn), d))
    descriptions = {p.name: p.description for p in ALL}
    for resource, d in diagnostics:
        message = d.message
        description = descriptions.get(d.policyName, "")
        if description and message.startswith(description):
            message = message[len(description) :].strip() or message
        if resource is not None:  # the policies name the resource themselves
            message = message.removeprefix(f"{resource.name}: ")
        level = analyzer_pb2.EnforcementLevel.Name(d.enforcementLevel).lower()
        found.setdefault(d.policyName, []).append(
            Violation(
                resource=resource.name if resource else d.urn or stack,
                type=resource.type if resource else "",
                message=message,
                enforcement_level=level,
            )
        )
    verdicts = []
    for policy in ALL:
        level = levels[policy.name]
        violations = found[policy.name]
        verdicts.append(
            PolicyVerdict(
                policy=policy.name,
                description=policy.description,
                enforcement_level=level,
                verdict="disabled" if level == "disabled" else ("fail" if violations else "pass"),
                violations=violations,
            )
        )
    return verdicts


# --- plan and cost --------------------------------------------------------------------------


def _cost(settings: Any, rate: float, rate_source: str, plan: dict[str, Any]) -> Cost:
    from serving.capacity.costs import instance_price
    from serving.capacity.gke_costs import stack_price_status
    from serving.catalog.hardware import Platform
    from serving.sizing.memory import monthly_cost

    hw = settings.profile
    price, _ = instance_price(settings)
    price_source = f"{settings.price.source} ({settings.price.as_of})" + "".join(
        f" [{note}]" for note in settings.price.unconfirmed
    )
    hours = settings.billed_hours_per_month
    low, high = settings.replica_bounds
    fixed: list[CostItem] = []
    if settings.deploy_platform == "gke":
        from serving.capacity.gke_costs import fixed_costs

        shape = settings.gke_shape
        price_source = f"{shape.machine_type} node: {price_source}"
        fixed = [
            CostItem(item=f.item, usd_per_hour=f.usd_per_hour, source=f.source, status=f.status)
            for f in fixed_costs(settings)
        ]
        note = (
            f"GKE: one {shape.machine_type} node per replica, {low} to {high} replicas (the "
            f"autoscaler's bounds), at the node pool's {settings.gke.node_provisioning} rate"
        )
    elif hw.platform is Platform.TPU:
        note = f"{low} TPU node(s), billed while they exist" + (
            f"; flex-start deletes them after {settings.tpu.max_run_hours:g} h"
            if settings.tpu.provisioning == "flex-start"
            else ""
        )
    else:
        note = "Cloud Run GPU, CPU always allocated: billed per instance while it runs"
    base = monthly_cost(sum(item.usd_per_hour or 0.0 for item in fixed))

    def month(instances: int) -> float | None:
        return None if price is None else base + monthly_cost(price, instances, hours=hours)

    return Cost(
        hardware=hw.key,
        usd_per_hour=price,
        price_source=price_source,
        price_status=stack_price_status(settings),
        instances_min=low,
        instances_max=high,
        usd_per_month_per_instance=None if price is None else monthly_cost(price, hours=hours),
        usd_per_month_idle=month(low),
        usd_per_month_max=month(high),
        fixed=fixed,
        requests_per_second=rate,
        requests_per_second_source=rate_source,
        replicas=plan["serving_replicas"],
        replicas_source=plan["serving_replicas_source"],
        requests_per_second_per_replica=plan["requests_per_second_per_replica"],
        usd_per_hour_at_rate=plan["usd_per_hour_at_rate"],
        usd_per_month_at_rate=plan["usd_per_month_at_rate"],
        usd_per_million_requests=plan["usd_per_million_requests"],
        usd_per_million_output_tokens=plan["usd_per_million_output_tokens"],
        note=f"{note} ({hours:g} h/month: {settings.billing})",
    )


def _performance(
    settings: Any,
    rate: float,
    replicas: int | None,
    mtp_acceptance: float | None = None,
    workload: Any = None,
) -> dict[str, Any]:
    """Predicted TTFT, ITL and throughput beside the cost (serving.capacity.perf; means at the
    client, predicted): each of `replicas` serving its share of `rate` req/s, and one instance
    full."""
    from serving.capacity.costs import instance_price, per_million
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan_perf import workload_for
    from serving.catalog.hardware import Platform

    model, calibration = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
    w = workload or workload_for(settings, None, None)
    if settings.profile.platform is Platform.TPU:
        concurrency = settings.vllm.max_num_seqs
    else:
        concurrency = settings.instance_concurrency
    busy = model.at_concurrency(concurrency, w)
    at_rate = model.at_rate(rate / replicas, w) if replicas else None
    price, status = instance_price(settings)
    return {
        "measured": False,
        "basis": model.basis,
        "calibrated": calibration is not None,
        "band": model.band,
        "prompt_tokens": w.prompt_tokens,
        "output_tokens": w.output_tokens,
        "mean_accepted_length": model.tokens_per_step,
        "front_end_ms": model.front_end_s * 1000.0,
        "at_rate": {
            "requests_per_second": rate / replicas,
            "stack_requests_per_second": rate,
            "replicas": replicas,
            **at_rate.as_dict(),
        }
        if replicas and at_rate is not None
        else None,
        "at_concurrency": {"concurrency": concurrency, **busy.as_dict()},
        "capacity_requests_per_s": model.capacity_rps(w),
        # One instance full: its price over its throughput (None: unknown price).
        "price_status": status,
        "usd_per_million_requests": per_million(price, busy.requests_per_s),
        "usd_per_million_output_tokens": per_million(price, busy.output_tokens_per_s),
    }


# --- the preview ----------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in HIDDEN_INPUTS}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


#: How Pulumi's engine protocol marks a secret value: a mapping whose SIG_KEY member is
#: SECRET_SIG, the plaintext under "value" (pulumi/runtime/rpc.py, _special_sig_key and
#: _special_secret_sig).
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
#: What `pulumi preview` shows for a secret input or output.
SECRET_SHOWN = "[secret]"


def shown_secrets(value: Any) -> Any:
    """``value`` with every secret (Pulumi's marked mapping) shown as ``[secret]``, as
    `pulumi preview` shows it: never the marker, never the plaintext."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return SECRET_SHOWN
        return {k: shown_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_secrets(v) for v in value]
    return value


def build_preview(
    stack: str,
    stack_file: Path | None = None,
    *,
    policy_config: Path | None = None,
    requests_per_second: float | None = None,
    root: Path = ROOT,
    project_dir: Path | None = None,
    mtp_acceptance: float | None = None,
    targets: tuple[Any, ...] = (),
    traffic: Any = None,
) -> Preview:
    """Render `stack` (or `stack_file`, previewed under the name `stack`) offline and judge it.

    `root` holds the program (`__main__.py`) and the policy pack; the stack file is
    `stack_file`, or `Pulumi.<stack>.yaml` of `project_dir`, or of the Pulumi project found
    from the current directory upward (as `pulumi -s`).

    Raises :class:`PreviewError` on bad input (the message names the file, key or stack).
    """
    from serving.capacity.perf import Workload
    from serving.capacity.plan import PlanError, report
    from serving.config.checks import SettingsError
    from serving.config.settings import load_settings

    if not (root / "__main__.py").is_file() or not (root / "Pulumi.yaml").is_file():
        raise PreviewError(
            f"no Pulumi project (Pulumi.yaml, __main__.py) in {root}: install this package "
            "from a checkout of the repository (scripts/setup, or pip install -e .)"
        )
    path = stack_file_path(stack, stack_file, project_dir)
    named_by_file = stack_file is not None and not stack
    if named_by_file:
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml") or "preview"
    from serving.config.stack_config import stack_name_problem

    problem = stack_name_problem(stack, None if named_by_file else "-s", stack_file=True)
    if problem:
        hint = " (pass -s NAME to preview the file under another name)" if named_by_file else ""
        raise PreviewError(f"{problem}{hint}")
    project_config, other_config = read_stack_file(path)
    unreadable = secure_keys_read(project_config, other_config)
    if unreadable:
        raise PreviewError(f"{path}: {unreadable_message(unreadable)}")
    try:
        settings = load_settings(project_config)
    except SettingsError as exc:
        raise PreviewError(f"{path}: {exc}") from None
    if requests_per_second is not None and not (
        math.isfinite(requests_per_second) and requests_per_second > 0
    ):
        raise PreviewError("--requests-per-second must be a positive, finite number")

    from preview.harness import render

    try:
        rendered = render(project_config, stack, other_config=other_config, root=root)
    except Exception as exc:  # the program refusing the stack (RunError, SettingsError, ...)
        raise PreviewError(f"{path}: the program refused the stack: {exc}") from None

    resources = [
        Resource(
            type=d.type,
            name=d.name,
            parent=d.parent,
            custom=d.custom,
            inputs=_clean(d.inputs),
            hooks=d.hooks,
        )
        for d in rendered.resources
    ]
    policies = run_policies(stack, resources, policy_config or (root / "policies" / "config.json"))
    # The policies judged the values; what is shown keeps secrets as `pulumi preview` does.
    resources = [r.model_copy(update={"inputs": shown_secrets(r.inputs)}) for r in resources]
    # One meaning of the rate: the load offered to the whole endpoint. The replica plan sizes
    # the replicas for it; each replica serves its share (the capacity plan's one instance,
    # the cost per million requests and the predicted figures at that rate).
    try:
        if callable(traffic):  # the command's workload options, lengths defaulting to the stack's
            traffic = traffic(settings)
        if traffic is not None and traffic.trace is not None and requests_per_second is None:
            requests_per_second = traffic.rate  # a trace's own mean rate
        workload = (
            None if traffic is None else Workload(traffic.prompt_tokens, traffic.output_tokens)
        )
        plan = report(
            stack,
            settings,
            requests_per_second,
            workload,
            flag="--requests-per-second",
            mtp_acceptance=mtp_acceptance,
            targets=targets,
            traffic=traffic,
        )
    except (PlanError, ValueError) as exc:
        raise PreviewError(f"{path}: {exc}") from None
    rate, rate_source = plan["requests_per_second"], plan["requests_per_second_source"]
    cost = _cost(settings, rate, rate_source, plan)
    performance = _performance(settings, rate, plan["serving_replicas"], mtp_acceptance, workload)
    mandatory = sum(1 for p in policies for v in p.violations if v.enforcement_level == "mandatory")
    advisory = sum(1 for p in policies for v in p.violations if v.enforcement_level == "advisory")
    fits = bool(plan["fits"])
    command = rendered.outputs.get("vllm_command_line")
    return Preview(
        stack=stack,
        stack_file=str(path),
        project=str(other_config.get("gcp:project", "(not set: a placeholder was used)")),
        hardware=settings.hardware,
        model=settings.model.model,
        resources=resources,
        outputs=shown_secrets(_clean(rendered.outputs)),
        vllm_command_line=command if isinstance(command, str) else None,
        messages=list(rendered.messages),
        policies=policies,
        plan=plan,
        fits=fits,
        cost=cost,
        performance=performance,
        mandatory_violations=mandatory,
        advisory_violations=advisory,
        ok=fits and mandatory == 0,
    )


def promotion_check(project: str, stack: str, config: Mapping[str, Any]) -> list[str]:
    """Why a promotion must not write this complete stack `config` (namespaced keys): the
    program's refusal, each mandatory policy violation (levels from `policies/config.json`, as
    the preview and `pulumi preview --policy-pack` apply them) or a model that does not fit;
    [] when the stack would deploy. `project` is the Pulumi project the keys are named for."""
    import tempfile

    if project != PROJECT:
        return [f"the stack config is for project {project!r}; this checkout is {PROJECT!r}"]
    with tempfile.TemporaryDirectory(prefix="gemma4-promotion-") as folder:
        path = Path(folder) / f"Pulumi.{stack}.yaml"
        from serving.config.stack_yaml import Secure

        plain = {
            k: {"secure": v.ciphertext} if isinstance(v, Secure) else v for k, v in config.items()
        }
        path.write_text(yaml.safe_dump({"config": plain}, sort_keys=False))
        try:
            preview = build_preview(stack, path)
        except PreviewError as exc:
            return [str(exc).replace(str(path), f"Pulumi.{stack}.yaml (as promoted)")]
    problems = [
        f"[{verdict.policy}] {violation.resource}: {violation.message}"
        for verdict in preview.policies
        for violation in verdict.violations
        if violation.enforcement_level == "mandatory"
    ]
    if not preview.fits:
        kv = preview.plan.get("kv_available_bytes", 0) / 2**30
        problems.append(
            f"the model does not fit: {kv:.2f} GiB left for the KV cache, below one sequence of "
            f"maxModelLen {preview.plan.get('max_model_len')} (gemma4 plan -s {stack})"
        )
    return problems
