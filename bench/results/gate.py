"""The SLO gate: does a run meet the stack's service-level objectives?

Thresholds are the stack's ``slo*`` keys (:class:`serving.config.groups.SloSettings`): every
measured cell's p95 TTFT and p95 E2E at most, success rate at least, and the best cell's
request throughput at least ``sloMinRequestsPerSecond`` (a concurrency-1 cell is not expected
to reach it). Skipped cells are not judged. Whatever the figures, the gate fails a run with no
measured cell, an incomplete grid, a ``failed`` or ``short`` cell, or (unless the caller
allows it: ``--allow-other-target``) one made against another model or hardware than the
stack's (:func:`target_differences`); each reason is in :attr:`GateResult.problems`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.results.store import MEASURED_STATUSES, RunData, cell_order
from endpoint.redact import redact
from serving.config.groups import SloSettings
from serving.config.settings import Settings, load_settings

__all__ = [
    "PROJECT",
    "GateCheck",
    "GateResult",
    "evaluate",
    "settings_for_stack",
    "slo_for_stack",
    "stack_config",
    "target_differences",
    "target_identity",
]

PROJECT = "gemma4-vllm"
"""The Pulumi project name: stack config keys are ``gemma4-vllm:<key>``."""


@dataclass(frozen=True)
class GateCheck:
    """One objective checked against one cell (or the whole run)."""

    cell: str
    """Cell id, or ``"run"`` for the run-level throughput objective."""
    slo: str
    """The stack key, e.g. ``sloP95TtftMs``."""
    metric: str
    threshold: float
    value: float | None
    passed: bool

    @property
    def comparison(self) -> str:
        return ">=" if self.slo in ("sloMinSuccessRate", "sloMinRequestsPerSecond") else "<="


@dataclass(frozen=True)
class GateResult:
    """Every check made; the gate passes when all passed, at least one cell was measured and
    there is no problem (incomplete grid, failed or short cells)."""

    checks: tuple[GateCheck, ...]
    measured_cells: int
    skipped_cells: int
    slo: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    missing_cells: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.measured_cells > 0 and not self.problems and all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[GateCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "measured_cells": self.measured_cells,
            "skipped_cells": self.skipped_cells,
            "missing_cells": list(self.missing_cells),
            "problems": list(self.problems),
            "slo": self.slo,
            "failures": [c.__dict__ for c in self.failures],
            "checks": [c.__dict__ for c in self.checks],
        }


def _cells(run: RunData | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return list(run.cells if isinstance(run, RunData) else run)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def evaluate(run: RunData | Sequence[Mapping[str, Any]], slo: SloSettings) -> GateResult:
    """Check a run's cells against ``slo`` (see the module docstring)."""
    cells = _cells(run)
    measured = sorted(
        (c for c in cells if c.get("status") in MEASURED_STATUSES),
        key=lambda c: cell_order(dict(c)),
    )
    problems: list[str] = []
    missing: list[str] = []
    if isinstance(run, RunData):
        expected = run.expected_ids()
        if expected is None:
            problems.append("run.json holds no grid: cannot tell whether the run is complete")
        else:
            missing = run.missing_ids()
            if missing:
                shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
                problems.append(
                    f"the run is incomplete: {len(missing)} of {len(expected)} cells of its grid "
                    f"were never measured ({shown}); finish it with --resume"
                )
    for cell in measured:
        if cell.get("status") != "ok":
            reasons = "; ".join(str(p) for p in cell.get("problems") or []) or "no reason kept"
            problems.append(f"cell {cell['id']} is {cell.get('status')}: {reasons}")
    if not measured:
        problems.append("no cell was measured")
    checks: list[GateCheck] = []
    per_cell = (
        ("sloP95TtftMs", "p95_ttft_ms", slo.slo_p95_ttft_ms, False),
        ("sloP95E2EMs", "p95_e2el_ms", slo.slo_p95_e2e_ms, False),
        ("sloMinSuccessRate", "success_rate", slo.slo_min_success_rate, True),
    )
    for cell in measured:
        for key, metric, threshold, at_least in per_cell:
            if threshold is None:
                continue
            value = _number(cell.get(metric))
            passed = value is not None and (value >= threshold if at_least else value <= threshold)
            checks.append(GateCheck(str(cell["id"]), key, metric, threshold, value, passed))
    if slo.slo_min_requests_per_second is not None and measured:
        rates = [r for c in measured if (r := _number(c.get("request_throughput"))) is not None]
        best = max(rates) if rates else None
        checks.append(
            GateCheck(
                "run",
                "sloMinRequestsPerSecond",
                "request_throughput",
                slo.slo_min_requests_per_second,
                best,
                best is not None and best >= slo.slo_min_requests_per_second,
            )
        )
    return GateResult(
        tuple(checks),
        measured_cells=len(measured),
        skipped_cells=sum(1 for c in cells if c.get("status") == "skipped"),
        slo=slo.model_dump(by_alias=True),
        problems=tuple(problems),
        missing_cells=tuple(missing),
    )


def stack_config(stack: str, cwd: str | Path | None = None) -> dict[str, Any]:
    """The ``gemma4-vllm:`` keys of ``Pulumi.<stack>.yaml`` in ``cwd`` (default: the project found
    upward), unprefixed; ValueError when there is no such stack file or it is not one."""
    from serving.config.project import stack_file
    from serving.config.stack_config import stack_name_problem
    from serving.config.stack_file import config_block

    problem = stack_name_problem(stack)
    if problem:
        raise ValueError(problem)
    path = stack_file(stack, None if cwd is None else Path(cwd), offers_stack_file=False)
    prefix = f"{PROJECT}:"
    config = config_block(path, PROJECT, shown=str(path))  # StackFileError is a ValueError
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def settings_for_stack(stack: str, cwd: str | Path | None = None) -> Settings:
    """The stack's validated settings."""
    return load_settings(stack_config(stack, cwd))


def slo_for_stack(stack: str, cwd: str | Path | None = None) -> SloSettings:
    """The stack's validated SLO settings (the whole stack config is validated)."""
    return settings_for_stack(stack, cwd).slo


_IDENTITY_WORDS = {
    "image": "image",
    "model_repo": "checkpoint",
    "model_revision": "checkpoint revision",
    "speculative_method": "speculative decoding",
}


def target_identity(settings: Settings) -> dict[str, str]:
    """What a stack runs beyond its names: the image and the checkpoint (repository,
    revision) and its speculative decoding. `bench run -s STACK` records it as the run's
    `target`, so a run of a same-named stack elsewhere, or of this stack before a promotion,
    is told apart by :func:`target_differences`."""
    return {
        "image": settings.image,
        "model_repo": settings.model.model,
        "model_revision": settings.model.model_revision,
        "speculative_method": settings.model.speculative_method,
    }


def target_differences(run: RunData, stack: str, settings: Settings) -> list[str]:
    """How the run's target differs from stack ``stack``'s: its served model name, its
    hardware, and the stack it was made against (when recorded); one sentence each. A run that
    does not record its model or hardware cannot be matched, which is a difference too."""
    recorded = run.run
    out: list[str] = []
    model = recorded.get("model")
    if model != settings.model.served_name:
        out.append(
            f"the run was made against model {redact(model, limit=120)!r}; stack {stack!r} serves "
            f"{settings.model.served_name!r}"
        )
    hardware = recorded.get("hardware")
    if hardware is None:
        out.append(
            "the run does not record its hardware (`bench run -s STACK` or `--hardware KEY` "
            f"records it), so it cannot be matched to stack {stack!r} on {settings.hardware!r}"
        )
    elif hardware != settings.hardware:
        out.append(
            f"the run was made on hardware {redact(hardware, limit=60)!r}; stack {stack!r} runs on "
            f"{settings.hardware!r}"
        )
    other = recorded.get("stack")
    if isinstance(other, str) and other != stack:
        out.append(f"the run was made against stack {redact(other, limit=60)!r}, not {stack!r}")
    target = recorded.get("target")
    if target is not None and not isinstance(target, dict):
        out.append("the run's recorded target is not an object, so it cannot be matched")
    elif isinstance(target, dict):
        for key, now in target_identity(settings).items():
            if key in target and target[key] != now:
                out.append(
                    f"the run measured {_IDENTITY_WORDS[key]} "
                    f"{redact(target[key], limit=120)!r}; stack {stack!r} declares {now!r}"
                )
    return out
