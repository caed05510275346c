"""Benchmark a vLLM endpoint as users feel it: sweeps, reports, comparisons and an SLO gate.

Library entry points (the CLI, ``python -m bench``, is built on them):

- :func:`run_sweep` / :func:`run_sweep_async`: run a :class:`Grid` against an endpoint into a
  run directory, cell by cell (resumable, one locked experiment per directory, after a
  one-request preflight that raises :class:`PreflightError`); returns the :class:`RunData`.
- :func:`load_run`: read a run directory back.
- :func:`evaluate` (from :mod:`bench.results.gate`): check a run against
  :class:`serving.config.settings.SloSettings`; :func:`slo_for_stack` reads them from a stack file.
- :func:`compare_runs`: runs side by side with deltas and cost per million requests.
- :func:`percentile`, :func:`summarize`: the statistics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.load.hotpath import RequestSpec
    from bench.load.sweep import Grid, PreflightError, SweepOptions, run_sweep, run_sweep_async
    from bench.reports.compare import Comparison, compare_runs, cost_per_million_requests
    from bench.results.gate import GateCheck, GateResult, evaluate, slo_for_stack, stack_config
    from bench.results.record import ERROR_KINDS, RequestResult
    from bench.results.stats import GoodputSlo, percentile, summarize
    from bench.results.store import SCHEMA_VERSION, CellKey, RunData, StoreError, load_run

# Imported on first use: a worker process of the load (bench.load.hotload) imports this package and
# should not pay for matplotlib, httpx or the sweep before its cell starts.
_EXPORTS = {
    name: module
    for module, names in {
        "reports.compare": ("Comparison", "compare_runs", "cost_per_million_requests"),
        "results.gate": ("GateCheck", "GateResult", "evaluate", "slo_for_stack", "stack_config"),
        "results.record": ("ERROR_KINDS", "RequestResult"),
        "load.hotpath": ("RequestSpec",),
        "results.stats": ("GoodputSlo", "percentile", "summarize"),
        "results.store": ("SCHEMA_VERSION", "CellKey", "RunData", "StoreError", "load_run"),
        "load.sweep": ("Grid", "PreflightError", "SweepOptions", "run_sweep", "run_sweep_async"),
    }.items()
    for name in names
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ERROR_KINDS",
    "SCHEMA_VERSION",
    "CellKey",
    "Comparison",
    "GateCheck",
    "GateResult",
    "GoodputSlo",
    "Grid",
    "PreflightError",
    "RequestResult",
    "RequestSpec",
    "RunData",
    "StoreError",
    "SweepOptions",
    "compare_runs",
    "cost_per_million_requests",
    "evaluate",
    "load_run",
    "percentile",
    "run_sweep",
    "run_sweep_async",
    "slo_for_stack",
    "stack_config",
    "summarize",
]
