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
    "Comparison": "reports.compare",
    "compare_runs": "reports.compare",
    "cost_per_million_requests": "reports.compare",
    "GateCheck": "results.gate",
    "GateResult": "results.gate",
    "evaluate": "results.gate",
    "slo_for_stack": "results.gate",
    "stack_config": "results.gate",
    "ERROR_KINDS": "results.record",
    "RequestResult": "results.record",
    "RequestSpec": "load.hotpath",
    "GoodputSlo": "results.stats",
    "percentile": "results.stats",
    "summarize": "results.stats",
    "SCHEMA_VERSION": "results.store",
    "CellKey": "results.store",
    "RunData": "results.store",
    "StoreError": "results.store",
    "load_run": "results.store",
    "Grid": "load.sweep",
    "PreflightError": "load.sweep",
    "SweepOptions": "load.sweep",
    "run_sweep": "load.sweep",
    "run_sweep_async": "load.sweep",
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
